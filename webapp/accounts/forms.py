"""The forms of the people pages: an account made from an invitation link, and the account page's settings."""
from django import forms
from django.contrib.auth.forms import PasswordChangeForm, UserCreationForm


class SignUpForm(UserCreationForm):
    """A new account from an invitation link: a username nobody has (checked case-insensitively, as Django's
    UserCreationForm does), the password twice through AUTH_PASSWORD_VALIDATORS, and an optional email."""

    email = forms.EmailField(required=False, help_text="optional: where alert emails go")

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")


class PasswordForm(PasswordChangeForm):
    """The account page's password change: the current password, then the new one twice through
    AUTH_PASSWORD_VALIDATORS (Django's form), with no autofocus, since the page has other forms above it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["old_password"].widget.attrs.pop("autofocus", None)


class EmailForm(forms.Form):
    """A new email, confirmed with the current password: alert emails (and whoever reads them) follow the address,
    so a session left open must not be enough to move it."""

    email = forms.EmailField(required=False, max_length=254, help_text="where alert emails go; empty for none")
    password = forms.CharField(label="Current password", strip=False,
                               widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
                               error_messages={"required": "Your current password is needed to change the email."})

    def __init__(self, user, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_password(self):
        password = self.cleaned_data.get("password", "")
        if not self.user.check_password(password):
            raise forms.ValidationError("Your current password was entered incorrectly.")
        return password
