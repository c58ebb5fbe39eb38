import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from webapp.accounts.models import Membership, Team

pytestmark = pytest.mark.django_db


def test_it_creates_the_team_and_user_with_create():
    call_command("add_member", "lab", "ada", "--role", "viewer", "--create")
    assert Membership.objects.get(team__name="lab", user__username="ada").role == "viewer"


def test_it_changes_the_role_of_an_existing_member():
    call_command("add_member", "lab", "ada", "--create")
    call_command("add_member", "lab", "ada", "--role", "admin")
    assert Membership.objects.get(team__name="lab", user__username="ada").role == "admin"
    assert Membership.objects.count() == 1


def test_it_refuses_a_missing_team_or_user_without_create():
    with pytest.raises(CommandError, match="no team named 'lab'"):
        call_command("add_member", "lab", "ada")
    Team.objects.create(name="lab")
    with pytest.raises(CommandError, match="no user named 'ada'"):
        call_command("add_member", "lab", "ada")
    assert not get_user_model().objects.exists()
