from io import StringIO

import pytest
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


def test_it_prints_a_token_that_authenticates_the_api(client, django_user_model):
    out = StringIO()
    call_command("create_api_token", "scripts", "--create", stdout=out)
    key = out.getvalue().strip()
    assert django_user_model.objects.filter(username="scripts").exists()
    assert client.get("/api/runs", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200


def test_it_refuses_an_unknown_user_without_create():
    with pytest.raises(CommandError, match="--create"):
        call_command("create_api_token", "ghost", stdout=StringIO())
