from django import forms

from knowledge.models import Memory
from memory.lifecycle.queue import FACET_CHOICES, OLDEST, ORDERS, PAGE_SIZE, PAGE_SIZES, QueueFilter
from memory.lifecycle.serializers import MAX_TEXT

FILTER_FIELDS = ("agent", "store", "tier", "category", "reason", "source", "imported", "author", "age", "q")


class RejectForm(forms.Form):
    reason = forms.CharField(max_length=2000, error_messages={"required": "Say why the memory is rejected."})


class ApproveForm(forms.Form):
    """Approval; a memory that conflicts with active ones needs the reviewer's decision (the
    service refuses an approval without one, so the form cannot default to leaving both)."""

    decision = forms.ChoiceField(choices=[("replace", "replace"), ("keep_both", "keep both")], required=False)
    boundary = forms.DateTimeField(
        required=False,
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"],
        error_messages={"invalid": "Give the boundary as a date and time."},
    )
    supersedes = forms.IntegerField(required=False, min_value=1)
    # The memories the card named as what approving retires or closes ("12,15"); absent, none is
    # checked (a client of its own); present, the approval touches no other (memory_approve).
    shown = forms.CharField(required=False, max_length=10_000)

    def clean_shown(self):
        if "shown" not in self.data:
            return None
        parts = [p for p in self.cleaned_data["shown"].split(",") if p.strip()]
        if not all(p.strip().isdigit() for p in parts):
            raise forms.ValidationError("The card's memories are ids.")
        return [int(p) for p in parts]


class RevokeForm(forms.Form):
    reason = forms.CharField(max_length=2000, error_messages={"required": "Say why the memory is revoked."})


class EditApproveForm(forms.Form):
    text = forms.CharField(
        max_length=MAX_TEXT, error_messages={"required": "The edited text may not be empty."}
    )
    reason = forms.CharField(max_length=2000, required=False)


class ReviseForm(forms.Form):
    text = forms.CharField(max_length=MAX_TEXT, error_messages={"required": "The text may not be empty."})
    reason = forms.CharField(max_length=2000, error_messages={"required": "Say why the text changes."})


class BulkReviewForm(forms.Form):
    ids = forms.TypedMultipleChoiceField(
        coerce=int, choices=(), error_messages={"required": "Select at least one memory."}
    )
    action = forms.ChoiceField(choices=[("approve", "approve"), ("reject", "reject")])
    reason = forms.CharField(max_length=2000, required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Any integer id is acceptable here; the service tells which ones were still queued.
        self.fields["ids"].valid_value = lambda value: str(value).isdigit()

    def clean(self):
        data = super().clean()
        if data.get("action") == "reject" and not (data.get("reason") or "").strip():
            self.add_error("reason", "Say why the memories are rejected.")
        return data


class PromoteForm(forms.Form):
    tier = forms.ChoiceField(choices=[("", "keep tier")] + Memory.TIERS, required=False)
    confidence = forms.FloatField(min_value=0, max_value=1, required=False)


class MemoryFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200)
    tier = forms.ChoiceField(choices=[("", "any tier")] + Memory.TIERS, required=False)
    status = forms.ChoiceField(choices=[("", "any status")] + Memory.STATUSES, required=False)
    store = forms.CharField(required=False, max_length=120)
    stale = forms.BooleanField(required=False)
    pinned = forms.BooleanField(required=False)


def first_error(form: forms.Form) -> str:
    for errors in form.errors.values():
        return str(errors[0])
    return "Invalid input."


class QueueFilterForm(forms.Form):
    """The review queue's filter, order and page, as its URL carries them. A value that does not
    parse is dropped (the queue shows everything for that facet) rather than refused: a stale
    shared link still opens."""

    agent = forms.SlugField(required=False, max_length=64)
    store = forms.CharField(required=False, max_length=120)
    tier = forms.ChoiceField(choices=[("", "")] + [(t, t) for t in FACET_CHOICES["tier"]], required=False)
    category = forms.CharField(required=False, max_length=40)
    reason = forms.ChoiceField(choices=[("", "")] + [(r, r) for r in FACET_CHOICES["reason"]], required=False)
    source = forms.ChoiceField(choices=[("", "")] + [(k, k) for k in FACET_CHOICES["source"]], required=False)
    imported = forms.ChoiceField(
        choices=[("", "")] + [(k, k) for k in FACET_CHOICES["imported"]], required=False
    )
    author = forms.CharField(required=False, max_length=150)
    age = forms.ChoiceField(choices=[("", "")] + [(a, a) for a in FACET_CHOICES["age"]], required=False)
    q = forms.CharField(required=False, max_length=200)
    order = forms.ChoiceField(choices=[(o, o) for o in ORDERS], required=False)
    size = forms.TypedChoiceField(choices=[(str(n), n) for n in PAGE_SIZES], coerce=int, required=False)
    page = forms.IntegerField(required=False, min_value=1)
    after = forms.IntegerField(required=False, min_value=1)  # "next page": after this memory

    def __init__(self, data=None, **kwargs):
        if data is not None and "import" in data:
            data = data.copy()
            data["imported"] = data.get("import")
        super().__init__(data, **kwargs)

    def parsed(self) -> tuple[QueueFilter, str, int, int]:
        """(filter, order, page size, page number), with defaults for what is missing or wrong."""
        self.is_valid()
        data = {name: self.cleaned_data.get(name) for name in self.fields if name not in self.errors}
        where = QueueFilter(**{name: (data.get(name) or "").strip() for name in FILTER_FIELDS})
        return where, data.get("order") or OLDEST, data.get("size") or PAGE_SIZE, data.get("page") or 1

    @property
    def after_id(self) -> int | None:
        """The memory "next page" starts after, if the URL names one."""
        self.is_valid()
        return None if "after" in self.errors else self.cleaned_data.get("after")
