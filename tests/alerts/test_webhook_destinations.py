"""Where a webhook may point, and how it is called (webapp/alerts/outbound.py): never at loopback, private,
link-local, multicast or reserved addresses, by IP or by a name that resolves to one, checked when the webhook
is saved and again at delivery on the address connected to; no redirects; one time limit for the whole delivery;
the admin sees the status and a short reason, never the body; a team has a bounded number of webhooks."""
import socket
import threading
import time

import pytest

from tests.alerts.receiver import Receiver
from tests.factories import make_prompt_set, make_team
from webapp.alerts.delivery import deliver
from webapp.alerts.engine import notification_text, webhook_payload
from webapp.alerts.models import Alert, Webhook, WebhookDelivery
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def nothing_internal_allowed(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = []


@pytest.fixture
def alert(django_user_model):
    team = make_team("lab", ada="admin")
    user = django_user_model.objects.get(username="ada")
    run = Run.objects.create(name="<!channel> *bold* <https://evil.example|click>", method="ttrl",
                             prompt_set=make_prompt_set(user, team=team), max_steps=5, created_by=user)
    return Alert.objects.create(team=team, run=run, rule="entropy_collapse", severity="warning", step=4,
                                message="prompt <@U123> collapsed & more", values={"entropy": 0.031})


def delivery_to(url, alert):
    hook = Webhook.objects.create(team=alert.team, url=url)  # saved without the check: as if DNS changed since
    return WebhookDelivery.objects.create(webhook=hook, alert=alert, event="opened", payload=webhook_payload(alert, "opened"))


@pytest.mark.parametrize("url, address", [
    ("http://127.0.0.1:8080/hook", "127.0.0.1"),
    ("http://10.1.2.3/hook", "10.1.2.3"),
    ("http://192.168.0.10/", "192.168.0.10"),
    ("http://172.16.5.4/", "172.16.5.4"),
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),  # the cloud metadata address
    ("http://100.64.0.1/", "100.64.0.1"),
    ("http://224.0.0.1/", "224.0.0.1"),
    ("http://240.0.0.1/", "240.0.0.1"),
    ("http://0.0.0.0:8000/", "0.0.0.0"),
    ("http://[::1]/", "::1"),
    ("http://[fe80::1]/", "fe80::1"),
    ("http://[fd00::1]/", "fd00::1"),
    ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1"),
])
def test_it_refuses_an_internal_address_when_the_webhook_is_saved(nothing_internal_allowed, url, address):
    problem = Webhook.url_problem(url)
    assert problem and address in problem and "not a public address" in problem
    assert "EVOLAB_WEBHOOK_ALLOWED_NETWORKS" in problem  # the switch a deployment with an internal relay needs


def test_it_refuses_a_name_that_resolves_to_an_internal_address(nothing_internal_allowed):
    problem = Webhook.url_problem("http://localhost:9000/hook")
    assert problem and "(localhost resolves to it)" in problem and "is not a public address" in problem


def test_public_addresses_and_names_it_cannot_resolve_now_are_accepted_when_saved(nothing_internal_allowed):
    assert Webhook.url_problem("https://93.184.215.14/hook") is None
    assert Webhook.url_problem("https://hooks.invalid/services/T1") is None  # checked again at delivery


def test_a_delivery_never_connects_to_an_internal_address_whatever_was_saved(nothing_internal_allowed, alert):
    with Receiver() as receiver:
        by_ip = delivery_to(receiver.url, alert)
        by_name = delivery_to(receiver.url.replace("127.0.0.1", "localhost"), alert)
        assert deliver(by_ip.pk) is None and deliver(by_name.pk) is None  # refused for good: no retry
    assert receiver.received == []
    for delivery in (by_ip, by_name):
        delivery.refresh_from_db()
        assert delivery.status == "failed" and delivery.response_code is None
        assert "is not a public address" in delivery.last_error
    assert by_ip.last_error.startswith("refused: 127.0.0.1 is not a public address")
    assert "(localhost resolves to it)" in by_name.last_error


def test_an_allowed_network_is_reachable(settings, alert):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    with Receiver() as receiver:
        delivery = delivery_to(receiver.url, alert)
        assert deliver(delivery.pk) is None
    assert len(receiver.received) == 1


def test_a_redirect_is_not_followed(alert):
    with Receiver() as target, Receiver(statuses=[302], headers={"Location": target.url}) as redirecting:
        delivery = delivery_to(redirecting.url, alert)
        assert deliver(delivery.pk) is not None
    assert len(redirecting.received) == 1 and target.received == []
    delivery.refresh_from_db()
    assert delivery.status == "pending" and delivery.response_code == 302
    assert "redirects are not followed" in delivery.last_error


def test_the_admin_sees_the_status_and_a_short_reason_never_the_body(alert):
    body = b"Traceback: SECRET_KEY=abc123 at /srv/internal/app.py"
    with Receiver(statuses=[500], body=body, reason="Internal \x1b[31mError" + "x" * 300) as receiver:
        delivery = delivery_to(receiver.url, alert)
        deliver(delivery.pk)
    delivery.refresh_from_db()
    assert delivery.response_code == 500
    assert "SECRET" not in delivery.last_error and "Traceback" not in delivery.last_error
    assert delivery.last_error.startswith("HTTP 500 Internal ") and "\x1b" not in delivery.last_error
    assert len(delivery.last_error) <= 100


class Dripping:
    """An endpoint that accepts the POST and then sends its answer one byte every 0.2 s, forever: each read
    succeeds, so only a limit on the whole delivery ends it."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/hook"
        self.stop = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        connection, _ = self.server.accept()
        connection.recv(65536)
        try:
            for byte in b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 10000:
                if self.stop.wait(0.2):
                    break
                connection.send(bytes([byte]))
        except OSError:
            pass
        connection.close()


def test_a_delivery_has_one_time_limit_for_the_whole_exchange(settings, alert):
    settings.WEBHOOK_TIMEOUT_SECONDS = 1.0
    endpoint = Dripping()
    delivery = delivery_to(endpoint.url, alert)
    started = time.monotonic()
    try:
        assert deliver(delivery.pk) is not None
    finally:
        endpoint.stop.set()
    assert time.monotonic() - started < 5  # a per-read timeout would wait for the whole 10,000-byte answer
    delivery.refresh_from_db()
    assert "timed out after 1 s" in delivery.last_error


def test_a_team_has_a_bounded_number_of_webhooks(settings, alert, client, django_user_model):
    settings.TEAM_MAX_WEBHOOKS = 2
    client.force_login(django_user_model.objects.get(username="ada"))
    url = f"/api/teams/{alert.team_id}/webhooks"
    for i in range(2):
        assert client.post(url, {"url": f"https://hooks.invalid/{i}"}, content_type="application/json").status_code == 201
    refused = client.post(url, {"url": "https://hooks.invalid/3"}, content_type="application/json")
    assert refused.status_code == 400 and "at most 2 webhooks" in refused.json()["error"]
    assert Webhook.objects.filter(team=alert.team).count() == 2


def test_user_text_is_escaped_for_slack(alert):
    text = notification_text(alert, "opened")
    assert "<!channel>" not in text and "&lt;!channel&gt;" in text
    assert "<https://evil.example|click>" not in text and "<@U123>" not in text
    assert "prompt &lt;@U123&gt; collapsed &amp; more" in text
    assert text.count("<") == 1  # the run's own link, and nothing else


def test_while_one_delivery_of_a_team_calls_out_its_others_wait_and_other_teams_do_not(alert, django_user_model):
    from webapp.shared_cache import shared_cache

    other_team = make_team("other-lab", grace="admin")
    grace = django_user_model.objects.get(username="grace")
    other_run = Run.objects.create(name="other", method="ttrl", prompt_set=make_prompt_set(grace, team=other_team),
                                   max_steps=5, created_by=grace)
    other_alert = Alert.objects.create(team=other_team, run=other_run, rule="entropy_collapse", severity="warning",
                                       step=1, message="m", values={})
    with Receiver() as receiver:
        waiting, other = delivery_to(receiver.url, alert), delivery_to(receiver.url, other_alert)
        # as while a delivery of the first team waits on its slow endpoint
        shared_cache().set(f"webhook-in-flight:{alert.team_id}", "held", timeout=30)
        try:
            assert deliver(waiting.pk) is not None
            assert deliver(other.pk) is None
        finally:
            shared_cache().delete(f"webhook-in-flight:{alert.team_id}")
        waiting.refresh_from_db()
        assert waiting.status == "pending" and waiting.attempts == 0  # waiting is not an attempt
        assert deliver(waiting.pk) is None
    assert len(receiver.received) == 2
