from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm
from django.db.models import Q

from knowledge.models import Agent
from knowledge.principal import ROLES


class LoginForm(AuthenticationForm):
    """Django's sign-in form, which tells a deactivated person so — once the password is right —
    instead of saying the password did not match (ModelBackend turns inactive users away before
    the form can say why)."""

    def clean(self):
        try:
            return super().clean()
        except forms.ValidationError:
            username, password = self.cleaned_data.get("username"), self.cleaned_data.get("password")
            user = get_user_model()._default_manager.filter(username=username).first() if username else None
            if user is not None and not user.is_active and password and user.check_password(password):
                raise forms.ValidationError(
                    "This account has been deactivated: an admin can turn it on again.", code="inactive"
                ) from None
            raise


class AgentForm(forms.Form):
    name = forms.SlugField(max_length=64)
    trusted = forms.BooleanField(required=False)
    instructions = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)

    def clean_name(self):
        return self.cleaned_data["name"].lower()  # whether it is taken is agent_create's check


class AgentEditForm(forms.Form):
    trusted = forms.BooleanField(required=False)
    instructions = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False)


ROLE_CHOICES = [("reviewer", "reviewer"), ("admin", "admin")]


class PersonCreateForm(forms.Form):
    username = forms.SlugField(max_length=150)
    role = forms.ChoiceField(choices=ROLE_CHOICES)
    password = forms.CharField(
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        min_length=8,
        help_text="At least 8 characters; tell it to them, they can change it under Account.",
    )


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES)


def people_with_a_role():
    """Active console users who hold a role (reviewer or admin): the people a token may act for."""
    return (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(groups__name__in=ROLES))
        .distinct()
        .order_by("username")
    )


class TokenCreateForm(forms.Form):
    """A token for an agent, for an integration (created when the name is new), or for a
    reviewer or admin (the API then acts with that person's role)."""

    kind = forms.ChoiceField(
        choices=[("integration", "integration"), ("agent", "agent"), ("person", "person")]
    )
    agent = forms.ModelChoiceField(
        queryset=Agent.objects.order_by("name"), to_field_name="name", required=False
    )
    integration = forms.SlugField(max_length=64, required=False)
    person = forms.ModelChoiceField(queryset=people_with_a_role(), to_field_name="username", required=False)
    label = forms.CharField(max_length=100, required=False)

    def clean(self):
        data = super().clean()
        if data.get("kind") == "person" and not data.get("person"):
            self.add_error("person", "Choose the reviewer or admin the token is for.")
        if data.get("kind") == "agent" and not data.get("agent"):
            self.add_error("agent", "Choose the agent the token is for.")
        if data.get("kind") == "integration" and not data.get("integration"):
            self.add_error("integration", "Name the integration the token is for.")
        return data
