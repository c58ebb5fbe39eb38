"""A user's open sockets re-check their access when it may have shrunk, whichever way the change was made (the
team page, the API, Django's admin, a management command): a membership removed, a token revoked, the account
deactivated, a browser signed out (its session gone: that browser's sockets close, the user's others stay).
An admin who stops being one (removed, demoted, deactivated) has the invitation links they made revoked.
Receivers are connected in AccountsConfig.ready()."""
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_delete, post_save

from webapp.live import access_changed_on_commit

from .models import ApiToken, Invitation, Membership


def membership_removed(sender, instance, **kwargs):
    access_changed_on_commit(instance.user_id)
    Invitation.revoke_made_by(instance.user_id, instance.team_id)


def membership_saved(sender, instance, **kwargs):
    if instance.role != Membership.ADMIN:
        Invitation.revoke_made_by(instance.user_id, instance.team_id)


def token_revoked(sender, instance, **kwargs):
    access_changed_on_commit(instance.user_id)


def user_saved(sender, instance, **kwargs):
    if not instance.is_active:
        access_changed_on_commit(instance.pk)
        Invitation.revoke_made_by(instance.pk)


def signed_out(sender, request, user, **kwargs):
    if user is not None:
        session = getattr(request, "session", None)
        access_changed_on_commit(user.pk, signed_out_session=getattr(session, "session_key", None))


def connect() -> None:
    post_delete.connect(membership_removed, sender=Membership, dispatch_uid="evolab-membership-removed")
    post_save.connect(membership_saved, sender=Membership, dispatch_uid="evolab-membership-saved")
    post_delete.connect(token_revoked, sender=ApiToken, dispatch_uid="evolab-token-revoked")
    post_save.connect(user_saved, sender=get_user_model(), dispatch_uid="evolab-user-saved")
    user_logged_out.connect(signed_out, dispatch_uid="evolab-signed-out")
