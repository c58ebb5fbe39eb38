"""Webhook deliveries against a real HTTP receiver: success, retry with backoff, giving up."""
import pytest
from django.test import override_settings

from tests.alerts.receiver import Receiver
from tests.factories import make_prompt_set, make_team
from webapp.alerts.delivery import deliver, retry_delay
from webapp.alerts.engine import webhook_payload
from webapp.alerts.models import Alert, Webhook, WebhookDelivery
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def alert(django_user_model):
    team = make_team("lab", ada="admin")
    user = django_user_model.objects.get(username="ada")
    run = Run.objects.create(name="collapsing <b>run</b>", method="ttrl", prompt_set=make_prompt_set(user, team=team),
                             max_steps=5, created_by=user)
    return Alert.objects.create(team=team, run=run, rule="entropy_collapse", severity="warning", step=4,
                                message="entropy fell to 0.031, 3% of its start 0.91", values={"entropy": 0.031})


def delivery_to(url, alert):
    hook = Webhook.objects.create(team=alert.team, url=url)
    return WebhookDelivery.objects.create(webhook=hook, alert=alert, event="opened", payload=webhook_payload(alert, "opened"))


def test_it_posts_slack_style_text_and_the_alert(alert):
    with Receiver() as receiver:
        delivery = delivery_to(receiver.url, alert)
        assert deliver(delivery.pk) is None
    body = receiver.received[0]["body"]
    assert body["text"].startswith(":warning: [warning] entropy_collapse opened on run #")
    assert "step 4" in body["text"] and body["alert"]["id"] == alert.pk and body["alert"]["state"] == "open"
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.attempts == 1 and delivery.response_code == 200


@override_settings(WEBHOOK_RETRY_BASE_SECONDS=2.0)
def test_a_failed_post_is_retried_with_growing_delays(alert):
    with Receiver(statuses=[500, 503]) as receiver:
        delivery = delivery_to(receiver.url, alert)
        assert deliver(delivery.pk) == 2.0
        delivery.refresh_from_db()
        assert delivery.status == "pending" and delivery.response_code == 500 and "HTTP 500" in delivery.last_error
        assert delivery.next_attempt_at is not None
        assert deliver(delivery.pk) == 4.0
        assert deliver(delivery.pk) is None
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.attempts == 3 and len(receiver.received) == 3
    assert [retry_delay(n) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]


@override_settings(WEBHOOK_MAX_ATTEMPTS=2)
def test_it_gives_up_after_the_last_attempt_and_says_why(alert):
    with Receiver(statuses=[500, 500, 500]) as receiver:
        delivery = delivery_to(receiver.url, alert)
        assert deliver(delivery.pk) is not None
        assert deliver(delivery.pk) is None
        assert deliver(delivery.pk) is None  # nothing left to do: delivering twice is safe
    delivery.refresh_from_db()
    assert delivery.status == "failed" and delivery.attempts == 2 and len(receiver.received) == 2


def test_an_unreachable_receiver_is_recorded_as_an_error(alert):
    with Receiver() as receiver:
        url = receiver.url
    delivery = delivery_to(url, alert)
    assert deliver(delivery.pk) is not None
    delivery.refresh_from_db()
    # a short reason for the admin, not a Python exception
    assert delivery.response_code is None and delivery.last_error == "connection refused"


def test_an_endpoint_that_hangs_up_without_answering_is_said_so_in_plain_words(alert):
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def hang_up():
        connection, _ = listener.accept()
        # read the whole request first: closing with some of it unread sends a reset instead, another failure
        request = b""
        while b"\r\n\r\n" not in request:
            request += connection.recv(65536)
        head, body = request.split(b"\r\n\r\n", 1)
        length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), b"0"))
        while len(body) < length:
            body += connection.recv(65536)
        connection.close()

    threading.Thread(target=hang_up, daemon=True).start()
    delivery = delivery_to(f"http://127.0.0.1:{listener.getsockname()[1]}/hook", alert)
    assert deliver(delivery.pk) is not None
    listener.close()
    delivery.refresh_from_db()
    assert delivery.last_error == "the endpoint closed the connection without answering"


def test_an_address_that_does_not_resolve_is_said_so(alert):
    delivery = delivery_to("http://no-such-host.invalid/hook", alert)
    assert deliver(delivery.pk) is not None
    delivery.refresh_from_db()
    assert delivery.last_error == "no-such-host.invalid does not resolve"


def test_each_try_tells_the_teams_pages_that_the_deliveries_changed_and_never_the_url(
        alert, monkeypatch, django_capture_on_commit_callbacks):
    pushed = []
    monkeypatch.setattr("webapp.live._send_all", lambda batches: pushed.extend(
        (group, m) for group, messages in batches.items() for m in messages))
    with Receiver() as receiver:
        delivery = delivery_to(receiver.url + "?token=secret", alert)
        with django_capture_on_commit_callbacks(execute=True):
            deliver(delivery.pk)
    # the try's start (tries: 1) and its outcome (delivered), each a bare "re-read the table" to the team
    assert pushed == [(f"team-{alert.team_id}", {"type": "webhook_deliveries"})] * 2
    assert "secret" not in str(pushed)
