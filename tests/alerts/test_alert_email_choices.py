"""Alert emails follow each member's choice on their account page (webapp/accounts/models.py::AlertEmails, read by
webapp/alerts/delivery.py::recipients): every alert (the default), warning and critical, critical only, or none."""
import pytest
from django.core import mail

from tests.factories import make_prompt_set, make_team
from webapp.accounts.models import AlertEmails
from webapp.alerts.delivery import recipients, send_email
from webapp.alerts.models import Alert
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

CHOICES = {"ada": None, "bo": "all", "cy": "warning", "di": "critical", "ed": "none"}


@pytest.fixture
def run(django_user_model):
    team = make_team("lab", **{name: "member" for name in CHOICES})
    for name, choice in CHOICES.items():
        user = django_user_model.objects.get(username=name)
        user.email = f"{name}@example.org"
        user.save()
        if choice:
            AlertEmails.choose(user, choice)
    owner = django_user_model.objects.get(username="ada")
    return Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(owner, team=team), max_steps=3,
                              created_by=owner)


def alert(run, severity, rule="entropy_collapse"):
    return Alert.objects.create(team=run.team, run=run, rule=rule, severity=severity, message="m")


@pytest.mark.parametrize("severity, who", [
    ("info", ["ada", "bo"]),
    ("warning", ["ada", "bo", "cy"]),
    ("critical", ["ada", "bo", "cy", "di"]),
])
def test_each_member_gets_the_severities_they_chose(run, severity, who):
    assert recipients(alert(run, severity)) == [f"{name}@example.org" for name in who]


def test_a_member_who_opted_out_gets_no_email(run):
    send_email(alert(run, "critical", rule="run_failed").pk, "opened")
    assert len(mail.outbox) == 1 and "ed@example.org" not in mail.outbox[0].to
    assert sorted(mail.outbox[0].to) == ["ada@example.org", "bo@example.org", "cy@example.org", "di@example.org"]


def test_the_choices_know_every_severity_of_an_alert():
    assert list(AlertEmails.SEVERITIES) == [severity for severity, _ in Alert.SEVERITIES]


def test_a_deactivated_account_gets_no_email(run, django_user_model):
    django_user_model.objects.filter(username="bo").update(is_active=False)
    assert "bo@example.org" not in recipients(alert(run, "critical"))
