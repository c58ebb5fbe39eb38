"""Sending alert notifications: webhook POSTs with retries, and email. Called by the
worker's tasks (workers/tasks.py) with row ids; safe to run twice (a delivered delivery
is not sent again)."""
import datetime
import http.client
import logging
import uuid

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from webapp.accounts.models import AlertEmails, Membership
from webapp.shared_cache import shared_cache

from . import outbound
from .engine import deliveries_changed, run_url
from .models import Alert, WebhookDelivery

log = logging.getLogger(__name__)
TEAM_BUSY_RETRY_SECONDS = 2.0  # when another delivery of the same team is calling out


def retry_delay(attempts: int) -> float:
    """Exponential backoff: base, 2·base, 4·base, ... after the 1st, 2nd, 3rd failure."""
    return settings.WEBHOOK_RETRY_BASE_SECONDS * 2 ** (attempts - 1)


def _take_team_slot(team_id: int) -> str | None:
    """A token when no other delivery of this team is calling out now, else None. One team's slow or dead
    endpoints so hold at most one of the alerts worker's threads, for at most WEBHOOK_TIMEOUT_SECONDS at a time,
    and the other teams' alerts and the uploads parsed by the same worker go on. The slot lives in Redis (every
    worker process shares it) and expires on its own if its holder dies."""
    token = uuid.uuid4().hex
    try:
        taken = shared_cache().add(f"webhook-in-flight:{team_id}", token,
                                       timeout=settings.WEBHOOK_TIMEOUT_SECONDS + 5)
    except Exception as exc:  # noqa: BLE001 - Redis away: deliver unthrottled rather than not at all
        log.warning("webhook team slot unavailable: %s", exc)
        return token
    return token if taken else None


def _release_team_slot(team_id: int, token: str) -> None:
    try:
        cache, key = shared_cache(), f"webhook-in-flight:{team_id}"
        if cache.get(key) == token:
            cache.delete(key)
    except Exception as exc:  # noqa: BLE001
        log.warning("webhook team slot unavailable: %s", exc)


def deliver(delivery_id: int) -> float | None:
    """POST the delivery's payload once. Returns the delay before the next try when it
    failed and tries remain, or when another delivery of its team is calling out (not an
    attempt), else None (delivered, failed for good, or nothing to do)."""
    with transaction.atomic():
        delivery = (WebhookDelivery.objects.select_for_update().select_related("webhook")
                    .filter(pk=delivery_id, status=WebhookDelivery.PENDING).first())
        if delivery is None:
            return None
        team_id = delivery.webhook.team_id
        slot = _take_team_slot(team_id)
        if slot is None:
            return TEAM_BUSY_RETRY_SECONDS
        delivery.attempts += 1
        delivery.save(update_fields=["attempts"])
        deliveries_changed(team_id)
    try:
        return _attempt(delivery)
    finally:
        _release_team_slot(team_id, slot)
        deliveries_changed(team_id)  # its outcome (delivered, failed, or the next try's time)


def _attempt(delivery: WebhookDelivery) -> float | None:
    refused = False
    try:
        answer = outbound.post_json(delivery.webhook.url, delivery.payload, timeout=settings.WEBHOOK_TIMEOUT_SECONDS,
                                    user_agent="Evolab-Alerts/1")
        # the status and the reason phrase only: whatever answered, its body is not shown to the admin
        code, error = answer.status, "" if 200 <= answer.status < 300 else f"HTTP {answer.status} {answer.reason}".strip()
        if 300 <= answer.status < 400:
            error += " (redirects are not followed)"
    except outbound.Refused as exc:  # the destination is not allowed: no retry will change that
        code, error, refused = None, f"refused: {exc}", True
    except TimeoutError as exc:
        code, error = None, str(exc)
    except (OSError, http.client.HTTPException) as exc:  # network, TLS and HTTP protocol errors: retried
        code, error = None, outbound.short_reason(exc)
    except Exception:  # noqa: BLE001 - anything else (an odd host name's UnicodeError): logged, still recorded
        log.exception("webhook delivery %s", delivery.pk)
        code, error = None, "delivery error (see the alerts worker's log)"
    delivery.response_code = code
    delivery.last_error = error
    if not error:
        delivery.status, delivery.delivered_at, delivery.next_attempt_at = WebhookDelivery.DELIVERED, timezone.now(), None
        delivery.save(update_fields=["status", "delivered_at", "next_attempt_at", "response_code", "last_error"])
        return None
    if refused or delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
        delivery.status, delivery.next_attempt_at = WebhookDelivery.FAILED, None
        delivery.save(update_fields=["status", "next_attempt_at", "response_code", "last_error"])
        log.warning("webhook delivery %s failed for good after %d attempts: %s", delivery.pk, delivery.attempts, error)
        return None
    delay = retry_delay(delivery.attempts)
    delivery.next_attempt_at = timezone.now() + datetime.timedelta(seconds=delay)
    delivery.save(update_fields=["next_attempt_at", "response_code", "last_error"])
    return delay


def recipients(alert: Alert) -> list[str]:
    """The emails of the team's members who want this alert's severity (their account page's choice); a deactivated
    account gets none (it may not sign in to see the alert)."""
    emails = (Membership.objects.filter(team_id=alert.team_id, user__is_active=True).exclude(user__email="")
              .exclude(user__alert_emails__wanted__in=AlertEmails.declining(alert.severity))
              .values_list("user__email", flat=True))
    return sorted(set(emails))


def send_email(alert_id: int, event: str) -> int:
    """Email the team's members who want it about an alert; returns how many messages went out."""
    alert = Alert.objects.select_related("run", "team").filter(pk=alert_id).first()
    if alert is None:
        return 0
    to = recipients(alert)
    if not to:
        return 0
    subject = f"[Evolab] {alert.severity}: {alert.rule} {event} on run #{alert.run_id} {alert.run.name}"
    return send_mail(subject[:200], email_text(alert, event), settings.DEFAULT_FROM_EMAIL, to, fail_silently=False)


def email_text(alert: Alert, event: str) -> str:
    """Plain text for a mail client: the webhooks' Slack markup (notification_text) read as noise there."""
    step = f" at step {alert.step}" if alert.step is not None else ""
    values = ", ".join(f"{name} {value}" for name, value in alert.values.items())
    return "\n".join([
        f"{alert.rule} {event} on run #{alert.run_id} {alert.run.name}{step} ({alert.severity})",
        alert.message,
        "",
        f"Run: {run_url(alert.run)}",
        f"Team: {alert.team.name}",
        f"Values: {values}" if values else "",
    ]).rstrip() + "\n"
