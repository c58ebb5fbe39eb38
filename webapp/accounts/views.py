"""Team pages: the switcher, the team page (members, roles and invitations) and joining by invitation.
Anything of a team the user is not in is a 404. The team's alerts, webhooks and alert rules are the alerts
app's pages (webapp/alerts/views.py)."""
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from rl.params import FieldError

from .access import require_role, role_in, team_or_404, teams_of
from .forms import SignUpForm
from .models import Invitation, InvitationError, Membership
from .teams import switch_team


@login_required
@require_POST
def switch(request):
    team = team_or_404(request.user, request.POST.get("team") or 0)
    switch_team(request, team)
    next_url = request.POST.get("next") or "/"
    return redirect(next_url if next_url.startswith("/") and not next_url.startswith("//") else "/")


@login_required
def team_list(request):
    teams = [(t, role_in(request.user, t)) for t in teams_of(request.user)]
    return render(request, "teams/list.html", {"teams": teams})


@login_required
def team_detail(request, pk):
    team = team_or_404(request.user, pk)
    role = role_in(request.user, team)
    is_admin = Membership.allows(role, Membership.ADMIN)
    error = field = None
    invitation_link = None
    if request.method == "POST":
        require_role(request.user, team, Membership.ADMIN)
        try:
            if request.POST.get("action") == "invite":
                # shown in this answer only: the key is stored as its digest (rendered, not redirected)
                key = Invitation.issue(team, request.POST.get("role", Membership.MEMBER), request.user)
                invitation_link = request.build_absolute_uri(reverse("teams:join", args=[key]))
            else:
                done = _team_action(request, team)
        except ValueError as exc:
            error, field = str(exc), getattr(exc, "field", None)
        else:
            if invitation_link is None:
                messages.success(request, done)
                return redirect("teams:detail", pk=team.pk)
    context = {
        "team": team,
        "role": role,
        "is_admin": is_admin,
        "members": Membership.objects.filter(team=team).select_related("user"),
        "roles": [r for r, _ in Membership.ROLES],
        "error": error,
        "field": field,
        "invitation_link": invitation_link,
        "invitation_days": f"{settings.INVITATION_DAYS:g}",
    }
    if is_admin:
        context.update(
            invitations=Invitation.pending().filter(team=team).select_related("created_by"),
        )
    return render(request, "teams/detail.html", context, status=400 if error else 200)


def _team_action(request, team) -> str:
    """One admin change from the team page; returns what to tell the user."""
    action = request.POST.get("action")
    if action == "revoke_invitation":
        Invitation.pending().filter(team=team, pk=request.POST.get("invitation") or 0).update(revoked_at=timezone.now())
        return "invitation revoked"
    if action in ("set_role", "remove_member"):
        membership = Membership.objects.filter(team=team, pk=request.POST.get("membership") or 0).select_related("user").first()
        if membership is None:
            raise ValueError("no such member")
        with transaction.atomic():
            # Changes to one team's roles take turns: two at once (removing the other admin while demoting
            # oneself) each counted the admins before the other committed, and left the team with none.
            team.lock()
            if action == "set_role":
                role = request.POST.get("role")
                if role not in Membership.RANK:
                    raise ValueError(f"unknown role {role!r}")
                membership.role = role
                membership.save(update_fields=["role"])
            else:
                membership.delete()
            # A team must keep an admin, or nobody could manage it again.
            if not Membership.objects.filter(team=team, role=Membership.ADMIN).exists():
                transaction.set_rollback(True)
                raise ValueError("a team needs at least one admin")
        return f"{membership.user.username}: {'removed' if action == 'remove_member' else membership.role}"
    raise ValueError(f"unknown action {action!r}")


def join(request, key):
    """An invitation link: the signed-in user sees the team and role, and joins by confirming (a POST, so a link
    that is only opened, by a mail scanner say, spends nothing). Signed out, it is where the invited person
    creates their account (or signs in, and comes back here)."""
    if not request.user.is_authenticated:
        return _join_with_a_new_account(request, key)
    try:
        if request.method == "POST":
            invitation, joined = Invitation.accept(key, request.user)
            messages.success(request, f"you joined {invitation.team.name} as {invitation.role}" if joined else
                             f"you are already in {invitation.team.name}; your role there is unchanged")
            switch_team(request, invitation.team)
            return redirect("teams:detail", pk=invitation.team.pk)
        invitation = Invitation.usable(key)
    except InvitationError as exc:
        return render(request, "teams/join.html", {"error": str(exc)}, status=404)
    return render(request, "teams/join.html", {
        "invitation": invitation, "member": role_in(request.user, invitation.team) is not None})


def _join_with_a_new_account(request, key):
    """The signed-out side of an invitation link: a sign-up form whose valid POST creates the account, signs it in
    and joins the team at once. A bad link answers the same 404 as signed in, and shows no form."""
    try:
        invitation = Invitation.usable(key)
        form = SignUpForm(request.POST if request.method == "POST" else None)
        if form.is_valid():
            try:
                invitation, user = Invitation.accept_as_new_account(
                    key, form.cleaned_data["username"], form.cleaned_data["email"], form.cleaned_data["password1"])
            except FieldError as exc:
                form.add_error(exc.field, exc.message)
            else:
                login(request, user)
                switch_team(request, invitation.team)
                messages.success(request, f"welcome, {user.username}: you joined {invitation.team.name} as {invitation.role}")
                return redirect("teams:detail", pk=invitation.team.pk)
    except InvitationError as exc:
        return render(request, "teams/join.html", {"error": str(exc)}, status=404)
    return render(request, "teams/join.html", {"invitation": invitation, "form": form},
                  status=400 if form.errors else 200)


def forbidden(request, exception=None):
    return render(request, "403.html", {"reason": str(exception or "")}, status=403)

