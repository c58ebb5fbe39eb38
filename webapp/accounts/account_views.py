"""The account page, /account/: the signed-in user's own password, email, API tokens and alert email choice. Each
form posts its `action`; a change answers with a redirect and a message, a refusal re-renders the page (400) with
the field named. A new token's key is in that one answer only (it is stored as its digest)."""
from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from rl.params import FieldError

from .forms import EmailForm, PasswordForm
from .models import AlertEmails, ApiToken


@login_required
def account(request):
    user = request.user
    password_form, email_form = PasswordForm(user), EmailForm(user, initial={"email": user.email})
    new_token = new_token_name = None
    errors = {}  # field: message, for the actions without a Django form
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "password":
            password_form = PasswordForm(user, request.POST)
            if password_form.is_valid():
                password_form.save()
                update_session_auth_hash(request, password_form.user)  # this session stays signed in
                return _done(request, "your password is changed")
        elif action == "email":
            email_form = EmailForm(user, request.POST)
            if email_form.is_valid():
                user.email = email_form.cleaned_data["email"]
                user.save(update_fields=["email"])
                return _done(request, f"your email is now {user.email}" if user.email else "your email is removed")
        else:
            try:
                if action != "create_token":
                    return _done(request, _change(user, action, request.POST))
                new_token_name = request.POST.get("name", "").strip()
                new_token = ApiToken.issue_named(user, new_token_name)
            except FieldError as exc:
                errors[exc.field] = exc.message
    failed = bool(errors or password_form.errors or email_form.errors)
    return render(request, "accounts/account.html", {
        "password_form": password_form,
        "email_form": email_form,
        "errors": errors,
        "new_token": new_token,
        "new_token_name": new_token_name,
        "tokens": user.api_tokens.all(),
        "alert_email_choices": AlertEmails.CHOICES,
        "alert_emails": request.POST.get("alert_emails") if "alert_emails" in errors else AlertEmails.of(user),
    }, status=400 if failed else 200)


def _change(user, action: str, data) -> str:
    """One change without a form of its own; returns what to tell the user."""
    if action == "revoke_token":
        token_id = str(data.get("token", ""))
        token = user.api_tokens.filter(pk=token_id).first() if token_id.isdigit() else None
        if token is None:  # another user's token reads like a missing one
            raise FieldError("token", "no such token of yours")
        token.delete()  # the deletion's signal closes the sockets it opened (signals.py)
        return f"token {token.name or '(unnamed)'} revoked: it no longer works"
    if action == "alert_emails":
        AlertEmails.choose(user, data.get("alert_emails"))
        return "your alert email choice is saved"
    raise FieldError("action", f"unknown action {action!r}")


def _done(request, message: str):
    messages.success(request, message)
    return redirect("account:page")
