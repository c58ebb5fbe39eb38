import pytest


@pytest.fixture(autouse=True)
def loopback_receivers_allowed(settings):
    """The tests' webhook receivers listen on 127.0.0.1, which a deployment refuses by default
    (tests/alerts/test_webhook_destinations.py checks that)."""
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
