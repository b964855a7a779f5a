from django import forms

from memory.skills import services


class SkillForm(forms.Form):
    name = forms.SlugField(max_length=64)
    title = forms.CharField(max_length=services.MAX_TITLE)
    instructions = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8}), required=False, max_length=services.MAX_INSTRUCTIONS
    )


class SkillEditForm(forms.Form):
    title = forms.CharField(max_length=services.MAX_TITLE)
    instructions = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 12}), required=False, max_length=services.MAX_INSTRUCTIONS
    )
    reason = forms.CharField(max_length=services.MAX_REASON, required=False)
    version = forms.IntegerField(widget=forms.HiddenInput, min_value=1)


class LessonEditForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=services.MAX_LESSON)
    reason = forms.CharField(max_length=services.MAX_REASON)


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=services.MAX_REASON)
