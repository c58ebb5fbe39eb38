"""A POST to the API that Django's CSRF check refuses is answered in JSON, like the rest of the API: a script that
sent no credentials, or a token that is not valid, gets the 401 the endpoint would have given; a signed-in browser
session without its CSRF token gets a 403 saying what to send. Pages keep the site's 403."""
import json

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

LAUNCH = {"name": "r", "method": "ttrl", "prompt_set": 1}


def post(client, path="/api/runs", **headers):
    return client.post(path, data=json.dumps(LAUNCH), content_type="application/json", **headers)


def test_a_post_without_credentials_is_a_json_401_saying_how_to_sign_in():
    response = post(Client(enforce_csrf_checks=True))
    assert response.status_code == 401
    assert response.json() == {"error": "sign in or send 'Authorization: Token KEY'"}


def test_a_post_with_a_token_that_is_not_valid_is_a_json_401_saying_so():
    response = post(Client(enforce_csrf_checks=True), HTTP_AUTHORIZATION="Token not-a-key")
    assert response.status_code == 401
    assert response.json() == {"error": "the API token is not valid"}


def test_a_signed_in_post_without_the_csrf_token_is_a_json_403_naming_what_to_send(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = post(client)
    assert response.status_code == 403
    body = response.json()
    assert "X-CSRFToken" in body["error"] and "Authorization: Token" in body["error"], body


def test_a_page_form_without_the_csrf_token_keeps_the_sites_403_page():
    response = Client(enforce_csrf_checks=True).post("/accounts/login/", {"username": "a", "password": "b"})
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")
