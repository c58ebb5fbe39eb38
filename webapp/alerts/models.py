from django.conf import settings
from django.db import models, transaction
from django.db.models import Q

from rl.params import FieldError
from webapp.accounts.models import Team

from .outbound import destination_problem


class AlertQuerySet(models.QuerySet):
    def visible_to(self, user):
        return self.filter(team__in=Team.objects.of(user))

    def active(self):
        return self.filter(state__in=Alert.ACTIVE)

    def current(self):
        return self.filter(state__in=Alert.CURRENT)


MAX_OF_RUN = 500


class Alert(models.Model):
    """A rule's condition holding on a run (DESIGN §4.5). At most one active (open or
    acknowledged) alert per (run, rule): a condition that persists updates it, one that
    clears resolves it, and a later recurrence opens a new one.

    When its run ends, an active alert leaves the rules' hands: an acknowledged one was seen and is `closed`; an
    open one nobody saw is `ended` ("run ended, not acknowledged") and stays in the default views until a member
    acknowledges it, which closes it. A collapse at 3 a.m. in a run that finished at 4 is still news at 9."""

    OPEN, ACKNOWLEDGED, RESOLVED, CLOSED, ENDED = "open", "acknowledged", "resolved", "closed", "ended"
    STATES = [(s, s) for s in (OPEN, ACKNOWLEDGED, ENDED, RESOLVED, CLOSED)]
    ACTIVE = (OPEN, ACKNOWLEDGED)  # the rules update it, one per (run, rule) at most
    CURRENT = (OPEN, ACKNOWLEDGED, ENDED)  # what the default views list (pages, run list, counts, the API's "current")
    UNACKNOWLEDGED = (OPEN, ENDED)  # what a member's acknowledgement changes: open -> acknowledged, ended -> closed
    STATE_LABELS = {ENDED: "run ended, not acknowledged", CLOSED: "closed with its run"}
    SEVERITIES = [(s, s) for s in ("info", "warning", "critical")]
    SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}  # worst first when sorted descending

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="alerts")
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="alerts")
    rule = models.CharField(max_length=50)
    severity = models.CharField(max_length=10, choices=SEVERITIES, default="warning")
    # The step where the alert fired (its chart marker); last_step follows its updates.
    step = models.IntegerField(null=True, blank=True)
    last_step = models.IntegerField(null=True, blank=True)
    message = models.TextField()
    values = models.JSONField(default=dict)
    state = models.CharField(max_length=15, choices=STATES, default=OPEN)
    updates = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    acknowledged_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+")
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    objects = AlertQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "rule"], condition=Q(state__in=["open", "acknowledged"]),
                                    name="one_active_alert_per_run_and_rule"),
        ]
        indexes = [models.Index(fields=["team", "state"]), models.Index(fields=["run", "rule"])]

    def __str__(self):
        return f"{self.rule} on run {self.run_id} ({self.state})"

    @classmethod
    def of_run_json(cls, run) -> list[dict]:
        """The run's alerts, oldest first, at most MAX_OF_RUN (GET /api/runs/{id}/alerts, the run page)."""
        found = cls.objects.filter(run=run).select_related("run", "acknowledged_by").order_by("created_at", "id")
        return [a.to_json() for a in found[:MAX_OF_RUN]]

    def state_label(self) -> str:
        label = self.STATE_LABELS.get(self.state, self.state)
        if self.acknowledged_by_id and self.state in (self.ACKNOWLEDGED, self.CLOSED):
            by = self.acknowledged_by.username
            label += f" by {by}" if self.state == self.ACKNOWLEDGED else f", acknowledged by {by}"
        return label

    def to_json(self):
        return {
            "id": self.pk,
            "team": self.team_id,
            "run": self.run_id,
            "run_name": self.run.name,
            "rule": self.rule,
            "severity": self.severity,
            "step": self.step,
            "last_step": self.last_step,
            "message": self.message,
            "values": self.values,
            "state": self.state,
            # said by the server, so no page keeps its own copy of which states are which
            "state_label": self.state_label(),
            "current": self.state in self.CURRENT,
            "needs_acknowledgement": self.state in self.UNACKNOWLEDGED,
            "updates": self.updates,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "acknowledged_by": self.acknowledged_by.username if self.acknowledged_by_id else None,
            "acknowledged_at": self.acknowledged_at.isoformat() if self.acknowledged_at else None,
            "resolved_at": self.resolved_at.isoformat() if self.resolved_at else None,
        }


class TeamAlertRules(models.Model):
    """A team's threshold overrides, {rule kind: {param: value}}, on top of the defaults of
    webapp.alerts.rules; a run's hyperparameters["alert_rules"] override these in turn."""

    team = models.OneToOneField("accounts.Team", on_delete=models.CASCADE, related_name="alert_rules")
    overrides = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")


class Webhook(models.Model):
    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=500)
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    @staticmethod
    def url_problem(url: str) -> str | None:
        """Why `url` cannot be a webhook (the message names it), or None."""
        from django.core.exceptions import ValidationError
        from django.core.validators import URLValidator

        if not url:
            return "'url' is required: the address alerts are POSTed to"
        if len(url) > 500:
            return "the URL is longer than 500 characters"
        try:
            URLValidator(schemes=["http", "https"])(url)
        except ValidationError:
            return f"{url[:200]!r} is not an http(s) URL"
        return destination_problem(url)

    @classmethod
    def add(cls, team, url: str, user) -> "Webhook":
        """A new webhook of `team`; FieldError naming what is wrong with the URL or the limit hit."""
        problem = cls.url_problem(url)
        with transaction.atomic():
            team.lock()  # two adds at once count in turn
            if problem is None and cls.objects.filter(team=team).count() >= settings.TEAM_MAX_WEBHOOKS:
                problem = (f"a team has at most {settings.TEAM_MAX_WEBHOOKS} webhooks (EVOLAB_TEAM_MAX_WEBHOOKS): "
                           "remove one first")
            if problem:
                raise FieldError("url", problem)
            return cls.objects.create(team=team, url=url, created_by=user)

    def to_json(self):
        return {"id": self.pk, "team": self.team_id, "url": self.url, "active": self.active,
                "created_at": self.created_at.isoformat()}


class WebhookDelivery(models.Model):
    """One POST of one alert notification to one webhook, with its retries."""

    PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"
    STATUSES = [(s, s) for s in (PENDING, DELIVERED, FAILED)]

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    alert = models.ForeignKey(Alert, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=20)  # opened | escalated | resolved | test
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=STATUSES, default=PENDING)
    attempts = models.PositiveIntegerField(default=0)
    response_code = models.IntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def to_json(self):
        return {
            "id": self.pk,
            "webhook": self.webhook_id,
            "url": self.webhook.url,
            "alert": self.alert_id,
            "event": self.event,
            "status": self.status,
            "attempts": self.attempts,
            "response_code": self.response_code,
            "last_error": self.last_error,
            "next_attempt_at": self.next_attempt_at.isoformat() if self.next_attempt_at else None,
            "created_at": self.created_at.isoformat(),
            "delivered_at": self.delivered_at.isoformat() if self.delivered_at else None,
        }


class RuleBacklog(models.Model):
    """Steps of a run stored but not judged yet: a batch of more than engine.BACKLOG_STEPS new steps (an archive
    imported, a restarted supervisor catching up) is judged by a worker after the ingestion commits, from
    `first_step` to the run's last step, in turns (engine.judge_backlog). While a run has one, its ingestion judges
    nothing itself, so the rules see its steps once each, in order. Deleted when the worker has judged the last."""

    run = models.OneToOneField("runs.Run", primary_key=True, on_delete=models.CASCADE, related_name="rule_backlog")
    first_step = models.IntegerField()
    requested_at = models.DateTimeField()  # when its task was last sent (resend_stale_backlogs)
