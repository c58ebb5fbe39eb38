"""Sending alert notifications: webhook POSTs with retries, and email. Called by the
worker's tasks (workers/tasks.py) with row ids; safe to run twice (a delivered delivery
is not sent again)."""
import datetime
import logging

import requests
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from .models import Alert, WebhookDelivery

log = logging.getLogger(__name__)
TIMEOUT_SECONDS = 5


def retry_delay(attempts: int) -> float:
    """Exponential backoff: base, 2·base, 4·base, ... after the 1st, 2nd, 3rd failure."""
    return settings.WEBHOOK_RETRY_BASE_SECONDS * 2 ** (attempts - 1)


def deliver(delivery_id: int) -> float | None:
    """POST the delivery's payload once. Returns the delay before the next try when it
    failed and tries remain, else None (delivered, failed for good, or nothing to do)."""
    with transaction.atomic():
        delivery = (WebhookDelivery.objects.select_for_update().select_related("webhook")
                    .filter(pk=delivery_id, status=WebhookDelivery.PENDING).first())
        if delivery is None:
            return None
        delivery.attempts += 1
        delivery.save(update_fields=["attempts"])
    try:
        response = requests.post(delivery.webhook.url, json=delivery.payload, timeout=TIMEOUT_SECONDS,
                                 headers={"User-Agent": "Evolab-Alerts/1"})
        code, error = response.status_code, "" if response.ok else f"HTTP {response.status_code}: {response.text[:200]}"
    except requests.RequestException as exc:
        code, error = None, f"{type(exc).__name__}: {exc}"[:500]
    delivery.response_code = code
    delivery.last_error = error
    if not error:
        delivery.status, delivery.delivered_at, delivery.next_attempt_at = WebhookDelivery.DELIVERED, timezone.now(), None
        delivery.save(update_fields=["status", "delivered_at", "next_attempt_at", "response_code", "last_error"])
        return None
    if delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
        delivery.status, delivery.next_attempt_at = WebhookDelivery.FAILED, None
        delivery.save(update_fields=["status", "next_attempt_at", "response_code", "last_error"])
        log.warning("webhook delivery %s failed for good after %d attempts: %s", delivery.pk, delivery.attempts, error)
        return None
    delay = retry_delay(delivery.attempts)
    delivery.next_attempt_at = timezone.now() + datetime.timedelta(seconds=delay)
    delivery.save(update_fields=["next_attempt_at", "response_code", "last_error"])
    return delay


def recipients(alert: Alert) -> list[str]:
    from webapp.accounts.models import Membership

    emails = (Membership.objects.filter(team_id=alert.team_id).exclude(user__email="")
              .values_list("user__email", flat=True))
    return sorted(set(emails))


def send_email(alert_id: int, event: str) -> int:
    """Email the team's members about an alert; returns how many messages went out."""
    from .engine import notification_text, run_url

    alert = Alert.objects.select_related("run", "team").filter(pk=alert_id).first()
    if alert is None:
        return 0
    to = recipients(alert)
    if not to:
        return 0
    subject = f"[Evolab] {alert.severity}: {alert.rule} {event} on run #{alert.run_id} {alert.run.name}"
    body = "\n".join([
        notification_text(alert, event),
        "",
        f"Team: {alert.team.name}",
        f"Run: {alert.run.name} (#{alert.run_id}) {run_url(alert.run)}",
        f"Rule: {alert.rule}, severity {alert.severity}, step {alert.step}",
        f"Values: {alert.values}",
    ])
    return send_mail(subject[:200], body, settings.DEFAULT_FROM_EMAIL, to, fail_silently=False)
