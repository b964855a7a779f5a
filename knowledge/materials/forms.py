from django import forms

from knowledge.errors import DomainError, Invalid


class LearnForm(forms.Form):
    """Ask an agent to learn a source: a file, pasted text or pasted web content. A refusal of
    the service is shown beside the field it names (`refusal_show`)."""

    agent = forms.CharField(max_length=64, error_messages={"required": "Pick the agent that learns it."})
    scope = forms.CharField(max_length=160, required=False)
    title = forms.CharField(max_length=300, required=False)
    file = forms.FileField(required=False)
    text = forms.CharField(required=False)
    html = forms.CharField(required=False)

    def clean(self):
        data = super().clean()
        if not (self.files.get("file") or data.get("text") or data.get("html")):
            raise forms.ValidationError("Upload a file, paste text, or paste web content.")
        return data

    def refusal_show(self, exc: DomainError) -> None:
        """Put a service's refusal beside the field it names, the rest above the form's button."""
        fields = exc.fields if isinstance(exc, Invalid) else {}
        if not fields:
            self.add_error(None, exc.message)
        for name, messages in fields.items():
            for message in messages if isinstance(messages, list) else [messages]:
                self.add_error(name if name in self.fields else None, str(message))
