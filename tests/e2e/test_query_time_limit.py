"""Every query of the web server has a time limit: through the web image's entrypoint (real daphne, its connection
pool, the production profile), a request whose query waits on a table another session has locked is cancelled by
PostgreSQL after EVOLAB_QUERY_TIMEOUT_SECONDS and answered 503 naming the limit, and the server goes on serving."""
import time

import psycopg
import pytest
import requests

from tests.e2e.helpers import PROXIED, web_entrypoint

pytestmark = pytest.mark.e2e


def test_a_query_past_the_limit_is_stopped_and_named_and_the_server_goes_on(live_stack, live_user, tmp_path):
    from django.db import connection

    from webapp.accounts.models import ApiToken
    from webapp.runs.models import Run

    if connection.vendor != "postgresql":
        pytest.skip("statement_timeout is PostgreSQL's")
    headers = {**PROXIED, "Authorization": f"Token {ApiToken.issue(live_user)}"}
    with web_entrypoint(live_stack, tmp_path, EVOLAB_QUERY_TIMEOUT_SECONDS="1") as base:
        assert requests.get(f"{base}/api/runs", headers=headers, timeout=30).status_code == 200
        with psycopg.connect(**connection.get_connection_params()) as other:
            other.execute(f"LOCK TABLE {Run._meta.db_table} IN ACCESS EXCLUSIVE MODE")
            started = time.monotonic()
            response = requests.get(f"{base}/api/runs", headers=headers, timeout=30)
            waited = time.monotonic() - started
            other.rollback()
        assert response.status_code == 503, response.text[:500]
        assert "limit of 1 s (EVOLAB_QUERY_TIMEOUT_SECONDS)" in response.json()["error"]
        assert 1 <= waited < 10
        assert requests.get(f"{base}/api/runs", headers=headers, timeout=30).status_code == 200
