from django import forms

from knowledge.llm.profiles import profile_names


class ModelProfileForm(forms.Form):
    name = forms.SlugField(max_length=64, help_text="default, light, or a name agents can use.")
    base_url = forms.URLField(
        required=False, max_length=300, assume_scheme="https", help_text="Blank: BRAIN_MODEL_BASE_URL."
    )
    model = forms.CharField(
        required=False, max_length=200, help_text="Blank: BRAIN_MODEL (light: BRAIN_MODEL_LIGHT)."
    )
    api_key = forms.CharField(
        required=False,
        max_length=500,
        widget=forms.PasswordInput(render_value=False),
        help_text="Blank keeps the stored key (or BRAIN_MODEL_API_KEY).",
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored key")
    timeout_seconds = forms.FloatField(required=False, min_value=0.1, max_value=600)
    max_retries = forms.IntegerField(required=False, min_value=0, max_value=10)
    daily_calls = forms.IntegerField(required=False, min_value=0)
    daily_tokens = forms.IntegerField(required=False, min_value=0)
    context_tokens = forms.IntegerField(
        required=False,
        min_value=256,
        help_text="Prompt + reply tokens. Blank: /v1/models, else BRAIN_MODEL_CONTEXT_TOKENS.",
    )
    structured_output = forms.ChoiceField(
        required=False,
        choices=[
            ("", "(environment)"),
            ("auto", "auto"),
            ("json_schema", "json_schema"),
            ("json_object", "json_object"),
        ],
        help_text="auto: json_schema until the server refuses it once.",
    )
    enabled = forms.BooleanField(required=False, initial=True)
    notes = forms.CharField(required=False, max_length=300)

    def service_kwargs(self) -> dict:
        data = dict(self.cleaned_data)
        clear = data.pop("clear_api_key")
        data["api_key"] = "" if clear else (data["api_key"] or None)
        return data


class AgentModelForm(forms.Form):
    profile = forms.ChoiceField()
    daily_calls = forms.IntegerField(required=False, min_value=0, help_text="Blank: BRAIN_AGENT_DAILY_CALLS.")
    daily_tokens = forms.IntegerField(
        required=False, min_value=0, help_text="Blank: BRAIN_AGENT_DAILY_TOKENS."
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["profile"].choices = [(n, n) for n in profile_names()]
