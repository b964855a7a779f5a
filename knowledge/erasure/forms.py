from django import forms


class EraseForm(forms.Form):
    """The typed confirmation: an erasure cannot be undone, so the admin types what it names
    (the person's name, or the word ERASE for one memory) and says why."""

    reason = forms.CharField(
        max_length=2000, widget=forms.TextInput(attrs={"aria-label": "Why it is erased"})
    )
    confirm = forms.CharField(
        max_length=200,
        widget=forms.TextInput(attrs={"aria-label": "Typed confirmation", "autocomplete": "off"}),
    )

    def __init__(self, *args, expected: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.expected = expected

    def clean_confirm(self):
        value = self.cleaned_data["confirm"].strip()
        if value != self.expected:
            raise forms.ValidationError(f"Type {self.expected} exactly to confirm; nothing was erased.")
        return value
