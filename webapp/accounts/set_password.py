"""Set-password links: how a user created by a site admin (`manage.py add_member ... --create`) chooses their
password. The link is Django's password-reset token, so it needs no table: it is signed with SECRET_KEY, expires
after PASSWORD_RESET_TIMEOUT (EVOLAB_SET_PASSWORD_DAYS), and hashes the user's password and last sign-in, so it
stops working once used."""
from django.contrib.auth.tokens import default_token_generator
from django.contrib.auth.views import PasswordResetConfirmView
from django.urls import reverse, reverse_lazy
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode


def set_password_link(user, base_url: str) -> str:
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    return base_url.rstrip("/") + reverse("set_password", args=[uid, default_token_generator.make_token(user)])


class SetPasswordView(PasswordResetConfirmView):
    """Django's confirm view (it moves the token from the address into the session before showing the form, so
    the page's own links and Referer never carry it), signing the user in once the password is set. A used,
    expired or mistyped link is a 404, as a bad invitation link is."""
    template_name = "registration/set_password.html"
    post_reset_login = True
    success_url = reverse_lazy("account:page")

    def render_to_response(self, context, **kwargs):
        if not context.get("validlink"):
            kwargs["status"] = 404
        return super().render_to_response(context, **kwargs)

    def form_invalid(self, form):
        return self.render_to_response(self.get_context_data(form=form), status=400)
