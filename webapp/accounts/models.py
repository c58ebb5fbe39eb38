import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from rl.params import FieldError


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    """A token for scripts and CI. Only its SHA-256 is stored, so a database leak does
    not leak usable tokens; the key itself is shown once, when it is created."""

    NAME_MAX = 100
    # last_used_at is written at most this often per token: a write on every API request would cost more than
    # the request's own reads, and "last used" is for spotting a token nothing uses any more
    USE_RESOLUTION = timedelta(minutes=10)

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=NAME_MAX, blank=True, default="", help_text="what uses it, for its owner")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    @classmethod
    def issue(cls, user, name: str = "") -> str:
        key = secrets.token_hex(20)
        cls.objects.create(user=user, name=name, digest=_digest(key))
        return key

    @classmethod
    def issue_named(cls, user, name: str) -> str:
        """A token made on the account page, where its owner names it to know it again in the list."""
        name = (name or "").strip()
        if not name:
            raise FieldError("name", "give the token a name (what will use it, e.g. 'CI nightly')")
        if len(name) > cls.NAME_MAX:
            raise FieldError("name", f"a token's name has at most {cls.NAME_MAX} characters")
        return cls.issue(user, name)

    @staticmethod
    def key_from_header(header: str) -> str | None:
        """The KEY of an `Authorization: Token KEY` header (HTTP or WebSocket), or None. `Bearer KEY` is read
        alike: it is how the MLflow client sends MLFLOW_TRACKING_TOKEN (DESIGN §4.8)."""
        scheme, _, key = (header or "").partition(" ")
        return key.strip() if scheme.lower() in ("token", "bearer") and key.strip() else None

    @classmethod
    def user_for_key(cls, key: str):
        """The token's user, if active, else None. One fixed statement: every API request asks, and
        the ORM compiling its query took longer than running it."""
        user_model = get_user_model()
        now = timezone.now()
        users = user_model.objects.raw(
            "SELECT u.*, t.id AS token_id, (t.last_used_at IS NULL OR t.last_used_at < %s) AS token_note_use "
            f"FROM {user_model._meta.db_table} u JOIN {cls._meta.db_table} t "
            f"ON t.user_id = u.{user_model._meta.pk.column} WHERE t.digest = %s AND u.is_active",
            [now - cls.USE_RESOLUTION, _digest(key)])
        user = next(iter(users), None)
        if user is not None and user.token_note_use:
            cls.objects.filter(pk=user.token_id).update(last_used_at=now)
        return user


class TeamQuerySet(models.QuerySet):
    def of(self, user):
        """The teams `user` is a member of (any role); none for an anonymous user."""
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(memberships__user=user)


class Team(models.Model):
    """Every prompt set, run, alert, alert rule and webhook belongs to one team (DESIGN §4.4).
    Objects of a team the user is not in answer exactly like objects that do not exist."""

    name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def lock(self) -> None:
        """Lock the team's row until the transaction ends: checks that count a team's rows before adding one
        (its webhooks, its active runs) then count in turn."""
        Team.objects.select_for_update().filter(pk=self.pk).first()

    def role_of(self, user) -> str | None:
        if user is None or not user.is_authenticated:
            return None
        return self.memberships.filter(user=user).values_list("role", flat=True).first()

    def to_json(self, user=None):
        data = {"id": self.pk, "name": self.name, "created_at": self.created_at.isoformat()}
        if user is not None:
            data["role"] = self.role_of(user)
        return data


class Membership(models.Model):
    VIEWER, MEMBER, ADMIN = "viewer", "member", "admin"
    ROLES = [(r, r) for r in (ADMIN, MEMBER, VIEWER)]
    # Each role can do what the roles below it can: viewers read, members also upload,
    # launch, cancel, resume and clone, admins also manage members, rules and webhooks.
    RANK = {VIEWER: 0, MEMBER: 1, ADMIN: 2}

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=ROLES, default=MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team__name", "user__username"]
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="one_membership_per_team_and_user")]

    def __str__(self):
        return f"{self.user} in {self.team} ({self.role})"

    @classmethod
    def allows(cls, role: str | None, needed: str) -> bool:
        return role is not None and cls.RANK[role] >= cls.RANK[needed]

    def to_json(self, viewer):
        """A member as `viewer` sees them: another member's email is theirs to share, not the team's (even its
        admins see only usernames), so it is given for the viewer's own membership only."""
        return {"user": self.user.username, "email": self.user.email if self.user_id == viewer.pk else None,
                "role": self.role}


class InvitationError(ValueError):
    """An invitation that cannot be used: unknown, used, revoked and expired read alike."""


class Invitation(models.Model):
    """A link a team admin makes for one person to join the team with a role: the person accepts it, signed in
    as themself (docs/security.md), so no admin can put someone in a team, or learn which usernames exist. Only
    the key's SHA-256 is stored; the link is shown once. One use, then it is spent."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invitations")
    role = models.CharField(max_length=10, choices=Membership.ROLES, default=Membership.MEMBER)
    digest = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                   related_name="invitations_made")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="invitations_accepted")
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    UNUSABLE = ("this invitation link is not valid: it was used, revoked or has expired, or was mistyped; "
                "ask the team's admin for a new one")

    @classmethod
    def issue(cls, team, role: str, created_by) -> str:
        """A new invitation's key (for its link), valid EVOLAB_INVITATION_DAYS."""
        if role not in Membership.RANK:
            raise ValueError(f"unknown role {role!r}")
        key = secrets.token_urlsafe(24)
        cls.objects.create(team=team, role=role, digest=_digest(key), created_by=created_by,
                           expires_at=timezone.now() + timedelta(days=settings.INVITATION_DAYS))
        return key

    @classmethod
    def pending(cls):
        """The usable invitations: unspent, unrevoked, unexpired, and made by someone who is still an active admin
        of the team (an admin who lost the role must not rejoin as one through a link they kept). The signals
        also revoke a former admin's links (revoke_made_by); this is the check at acceptance whatever way the
        role was lost."""
        return cls.objects.filter(accepted_at=None, revoked_at=None, expires_at__gt=timezone.now(),
                                  created_by__is_active=True, created_by__memberships__team=models.F("team"),
                                  created_by__memberships__role=Membership.ADMIN)

    @classmethod
    def revoke_made_by(cls, user_id: int, team_id: int | None = None) -> None:
        """Revoke the pending invitations `user_id` made (in `team_id`, or in every team)."""
        made = cls.objects.filter(created_by_id=user_id, accepted_at=None, revoked_at=None)
        (made if team_id is None else made.filter(team_id=team_id)).update(revoked_at=timezone.now())

    @classmethod
    def usable(cls, key: str) -> "Invitation":
        invitation = cls.pending().select_related("team").filter(digest=_digest(key or "")).first()
        if invitation is None:
            raise InvitationError(cls.UNUSABLE)
        return invitation

    @classmethod
    def accept(cls, key: str, user) -> tuple["Invitation", bool]:
        """(the invitation, whether `user` joined): spends the invitation and makes `user` a member with its role.
        A user already in the team keeps their role and the invitation stays unspent, for its intended person."""
        with transaction.atomic():
            # locked while read: of two accepts at once, the second finds it spent
            invitation = cls.pending().select_for_update().filter(digest=_digest(key or "")).first()
            if invitation is None:
                raise InvitationError(cls.UNUSABLE)
            if Membership.objects.filter(team=invitation.team, user=user).exists():
                return invitation, False
            try:
                with transaction.atomic():
                    Membership.objects.create(team=invitation.team, user=user, role=invitation.role)
            except IntegrityError:  # joined by another link meanwhile
                return invitation, False
            invitation.accepted_by, invitation.accepted_at = user, timezone.now()
            invitation.save(update_fields=["accepted_by", "accepted_at"])
        return invitation, True

    @classmethod
    def accept_as_new_account(cls, key: str, username: str, email: str, password: str) -> tuple["Invitation", object]:
        """(the invitation, the new user): someone without an account, who opened the link signed out, creates
        one and joins with it in one transaction, so a link spent meanwhile (InvitationError) leaves no account
        behind. The caller has validated the fields (SignUpForm); a username taken since is a FieldError."""
        with transaction.atomic():
            try:
                with transaction.atomic():
                    user = get_user_model().objects.create_user(username=username, email=email, password=password)
            except IntegrityError:
                raise FieldError("username", "A user with that username already exists.") from None
            invitation, _ = cls.accept(key, user)
        return invitation, user


class AlertEmails(models.Model):
    """Which alert emails a user gets (their account page), one choice for all their teams: the alerts app's
    delivery (webapp/alerts/delivery.py::recipients) reads it. A user without a row gets every alert email, as
    everyone did before the choice existed."""

    ALL, WARNING, CRITICAL, NONE = "all", "warning", "critical", "none"
    CHOICES = [(ALL, "every alert (info, warning and critical)"), (WARNING, "warning and critical alerts"),
               (CRITICAL, "critical alerts only"), (NONE, "no alert emails")]
    # The alerts' severities, least first: webapp/alerts/models.py::Alert.SEVERITIES, which this app may not import
    # (the alerts app imports accounts); tests/alerts/test_alert_email_choices.py checks that they agree.
    SEVERITIES = ("info", "warning", "critical")
    _LEAST = {ALL: 0, WARNING: 1, CRITICAL: 2, NONE: len(SEVERITIES)}  # the least severity each choice is sent

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True,
                                related_name="alert_emails")
    wanted = models.CharField(max_length=10, choices=CHOICES, default=ALL)

    @classmethod
    def of(cls, user) -> str:
        return cls.objects.filter(user=user).values_list("wanted", flat=True).first() or cls.ALL

    @classmethod
    def choose(cls, user, wanted: str) -> None:
        if wanted not in cls._LEAST:
            raise FieldError("alert_emails", f"choose one of: {', '.join(c for c, _ in cls.CHOICES)}")
        cls.objects.update_or_create(user=user, defaults={"wanted": wanted})

    @classmethod
    def declining(cls, severity: str) -> list[str]:
        """The choices of the users who get no email about an alert of `severity`."""
        rank = cls.SEVERITIES.index(severity)
        return [choice for choice, least in cls._LEAST.items() if least > rank]
