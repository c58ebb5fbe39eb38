"""A request whose database statement runs past the web server's limit is answered 503 naming the limit
(webapp/query_limit.py). The limit itself is PostgreSQL's statement_timeout on the web server's connections: here set
on the test's connection, through the web image's entrypoint in tests/e2e/test_query_time_limit.py."""
from contextlib import contextmanager

import psycopg
import pytest
from django.db import connection

from webapp.runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def limited(settings):
    if connection.vendor != "postgresql":
        pytest.skip("statement_timeout is PostgreSQL's; SQLite has no such limit")
    settings.QUERY_TIMEOUT_SECONDS = 0.3
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 300")
    yield
    with connection.cursor() as cursor:
        cursor.execute("RESET statement_timeout")


@contextmanager
def runs_table_locked():
    """Another session holds the run table, as a long migration would: every read of it waits."""
    with psycopg.connect(**connection.get_connection_params()) as other:
        other.execute(f"LOCK TABLE {Run._meta.db_table} IN ACCESS EXCLUSIVE MODE")
        yield
        other.rollback()


def test_an_api_request_past_the_limit_gets_a_503_naming_it(api_client):
    with runs_table_locked():
        response = api_client.get("/api/runs")
    assert response.status_code == 503
    assert "ran past the server's limit of 0.3 s (EVOLAB_QUERY_TIMEOUT_SECONDS)" in response.json()["error"]
    assert api_client.get("/api/runs").status_code == 200  # the connection is fine afterwards


def test_a_page_past_the_limit_says_so_in_a_page(client, user):
    client.force_login(user)
    with runs_table_locked():
        response = client.get("/")
    assert response.status_code == 503
    assert 'id="query-timeout"' in response.content.decode() and "EVOLAB_QUERY_TIMEOUT_SECONDS" in response.content.decode()
