"""Console forms for entries, blocks, relations and curation guides. They only parse what a
browser sends (lists, JSON, dates); the services validate and decide."""

import json
import math

from django import forms

from knowledge.limits import MAX_JSON_DEPTH, json_size_error
from knowledge.models import Agent


def _lines(value: str) -> list[str]:
    return [line.strip() for line in (value or "").splitlines() if line.strip()]


class JSONObjectField(forms.CharField):
    """A textarea holding a JSON object."""

    widget = forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "class": "mono"})

    def to_python(self, value):
        value = (value or "").strip()
        if not value:
            return {}
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).")
        except RecursionError:
            raise forms.ValidationError(f"Nests deeper than {MAX_JSON_DEPTH} levels.")
        if not isinstance(parsed, dict):
            raise forms.ValidationError('Properties are a JSON object, like {"team": "IT"}.')
        error = json_size_error(parsed)
        if error:
            raise forms.ValidationError(error)
        return parsed

    def prepare_value(self, value):
        if isinstance(value, dict):
            return json.dumps(value, indent=2, ensure_ascii=False) if value else ""
        return value


class SourcesField(forms.CharField):
    """One source per line, as kind:ref (kb:KB-7, ticket:INC-12, entry:42)."""

    widget = forms.Textarea(attrs={"rows": 2, "placeholder": "kind:ref, one per line (kb:KB-7)"})

    def to_python(self, value):
        return _lines(value)

    def prepare_value(self, value):
        if isinstance(value, list):
            return "\n".join(f"{s['kind']}:{s['ref']}" if isinstance(s, dict) else str(s) for s in value)
        return value


class EntryMetaForm(forms.Form):
    name = forms.CharField(max_length=300)
    type = forms.CharField(
        max_length=64, required=False, widget=forms.TextInput(attrs={"list": "entry-types"})
    )
    aliases = forms.CharField(
        required=False,
        help_text="Other names it goes by, comma-separated.",
    )
    summary = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    properties = JSONObjectField(required=False, help_text="A JSON object.")
    version = forms.IntegerField(widget=forms.HiddenInput, required=False)

    def clean_aliases(self):
        return [a.strip() for a in self.cleaned_data["aliases"].split(",") if a.strip()]


class EntryCreateForm(EntryMetaForm):
    owner = forms.ModelChoiceField(queryset=Agent.objects.all(), to_field_name="name")
    scope = forms.CharField(
        initial="shared",
        help_text="shared, agent (the owner's self store), private:PERSON or channel:CHANNEL.",
        widget=forms.TextInput(attrs={"list": "entry-scopes"}),
    )
    first_block = forms.CharField(
        required=False, label="First block", widget=forms.Textarea(attrs={"rows": 3})
    )
    first_block_sources = SourcesField(required=False, label="Its sources")

    field_order = ["owner", "scope", "name", "type", "aliases", "summary", "properties"]


class BlockForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}))
    sources = SourcesField(required=False)


class BlockCorrectForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}))
    reason = forms.CharField(
        required=False,  # the service refuses an empty reason, with the message people see
        max_length=2000,
        widget=forms.TextInput(attrs={"placeholder": "Why is this correct now? (required)"}),
    )
    sources = SourcesField(required=False)
    version = forms.IntegerField(widget=forms.HiddenInput, required=False)


class RelationForm(forms.Form):
    predicate = forms.CharField(max_length=100, widget=forms.TextInput(attrs={"placeholder": "works at"}))
    target = forms.IntegerField(
        label="Target entry id", widget=forms.NumberInput(attrs={"list": "relation-targets", "min": 1})
    )
    sources = SourcesField(required=False, label="Evidence", help_text="At least one source that states it.")
    valid_from = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    valid_to = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))


class ThresholdsField(JSONObjectField):
    """Numbers by name, as the guide shows them: one `key value` line each (`min_blocks 3`), or
    a JSON object. A line that is not a name and a number is refused, naming the line."""

    def to_python(self, value):
        text = (value or "").strip()
        if text.startswith("{"):
            return super().to_python(text)
        parsed, errors = {}, []
        for number, line in enumerate((value or "").splitlines(), start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2:
                errors.append(
                    f"Line {number} ({line.strip()}): write a name and a number, like min_blocks 3."
                )
                continue
            try:
                found = int(parts[1]) if parts[1].lstrip("+-").isdigit() else float(parts[1])
            except ValueError:
                found = math.nan
            if not math.isfinite(found):
                errors.append(f"Line {number} ({line.strip()}): {parts[1]} is not a number.")
                continue
            parsed[parts[0]] = found
        if errors:
            raise forms.ValidationError(errors)
        return parsed

    def prepare_value(self, value):
        if isinstance(value, dict):
            return "\n".join(f"{k} {v}" for k, v in value.items())
        return value


class GuideForm(forms.Form):
    domain_types = forms.CharField(required=False, help_text="Comma-separated entry types.")
    taxonomy = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}))
    page_thresholds = ThresholdsField(
        required=False, help_text="One name and number a line (min_blocks 3), or a JSON object of numbers."
    )
    update_rules = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}))
    version = forms.IntegerField(widget=forms.HiddenInput, required=False)

    def clean_domain_types(self):
        return [t.strip() for t in self.cleaned_data["domain_types"].split(",") if t.strip()]
