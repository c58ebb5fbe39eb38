"""The forms of the people pages: an account made from an invitation link, and the account page's settings."""
from django import forms
from django.contrib.auth.forms import UserCreationForm


class SignUpForm(UserCreationForm):
    """A new account from an invitation link: a username nobody has (checked case-insensitively, as Django's
    UserCreationForm does), the password twice through AUTH_PASSWORD_VALIDATORS, and an optional email."""

    email = forms.EmailField(required=False, help_text="optional: where alert emails go")

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")
