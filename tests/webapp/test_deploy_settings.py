"""Deployment settings: nothing starts without SECRET_KEY outside the demo and the tests;
`check --deploy` passes with the production profile; the demo account is its team's admin, not a
superuser. The checks run `manage.py` as an operator would, without the test session's variables."""
import os
import secrets
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from scripts.stack import ROOT


def operator_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_VERSION", "EVOLAB_DEV", "SECRET_KEY")}
    return {**env, **extra}


def manage(env, *args):
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)


def test_without_a_secret_key_nothing_starts_and_the_error_says_what_to_set():
    result = manage(operator_env(), "check")
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr and "secrets.token_urlsafe" in result.stderr


def test_check_deploy_passes_with_the_production_profile():
    env = operator_env(DJANGO_SETTINGS_MODULE="webapp.settings_production", SECRET_KEY=secrets.token_urlsafe(50),
                       ALLOWED_HOSTS="evolab.example.org")
    result = manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_the_plain_settings_fail_check_deploy_naming_what_is_missing():
    env = operator_env(SECRET_KEY=secrets.token_urlsafe(50))
    result = manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode != 0
    for warning in ("W004", "W008", "W012", "W016"):
        assert warning in result.stderr


@pytest.mark.django_db
def test_the_demo_account_is_its_teams_admin_and_not_a_superuser():
    from webapp.accounts.models import Membership

    call_command("load_demo_data", "--username", "demo-x", "--password", "pw-demo-1", stdout=open(os.devnull, "w"))
    user = get_user_model().objects.get(username="demo-x")
    assert not user.is_superuser and not user.is_staff
    assert Membership.objects.get(user=user, team__name="demo").role == Membership.ADMIN


@pytest.mark.django_db
def test_a_demo_account_made_a_superuser_before_is_demoted():
    get_user_model().objects.create_user(username="demo-y", password="pw-demo-1", is_superuser=True, is_staff=True)
    call_command("load_demo_data", "--username", "demo-y", "--password", "pw-demo-1", stdout=open(os.devnull, "w"))
    user = get_user_model().objects.get(username="demo-y")
    assert not user.is_superuser and not user.is_staff


@pytest.mark.django_db
def test_the_demo_account_gets_an_email_for_its_alerts_once_and_keeps_one_it_has():
    get_user_model().objects.create_user(username="demo-z", password="pw-demo-1")
    call_command("load_demo_data", "--username", "demo-z", "--password", "pw-demo-1", stdout=open(os.devnull, "w"))
    assert get_user_model().objects.get(username="demo-z").email == "demo@example.com"
    get_user_model().objects.filter(username="demo-z").update(email="me@lab.example")
    call_command("load_demo_data", "--username", "demo-z", "--password", "pw-demo-1", stdout=open(os.devnull, "w"))
    assert get_user_model().objects.get(username="demo-z").email == "me@lab.example"
