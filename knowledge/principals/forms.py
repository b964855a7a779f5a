from django import forms

from knowledge.models import Agent


class AgentForm(forms.Form):
    name = forms.SlugField(max_length=64)
    trusted = forms.BooleanField(required=False)
    instructions = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)

    def clean_name(self):
        name = self.cleaned_data["name"].lower()
        if Agent.objects.filter(name=name).exists():
            raise forms.ValidationError("An agent with this name already exists.")
        return name


class AgentEditForm(forms.Form):
    trusted = forms.BooleanField(required=False)
    instructions = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False)
