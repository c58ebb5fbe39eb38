"""What a request hears when its database statement ran past the web server's time limit.

The web server's PostgreSQL connections carry `statement_timeout` = EVOLAB_QUERY_TIMEOUT_SECONDS (settings.py, set
where the server's connection pool is): PostgreSQL cancels a statement that runs longer, whether it computes (a
search no index serves) or waits (a lock a migration holds). Without the limit such a request held one of the
server's HTTP threads and a pooled connection for as long as the query took; other users' pages queued behind it.
The cancelled statement surfaces as a DatabaseError whose cause has SQLSTATE 57014 (query_canceled); this answers it
503, JSON under /api/ and a page elsewhere, saying what happened and what to try, instead of a bare 500.
SQLite (the demo without PostgreSQL) has no such limit.
"""
import logging

from django.conf import settings
from django.db import DatabaseError
from django.shortcuts import render

from webapp.api import error

log = logging.getLogger(__name__)

QUERY_CANCELED = "57014"


def cancelled_by_the_limit(exc: BaseException) -> bool:
    while exc is not None:
        if getattr(exc, "sqlstate", None) == QUERY_CANCELED:
            return True
        exc = exc.__cause__
    return False


class QueryTimeLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, DatabaseError) or not cancelled_by_the_limit(exception):
            return None
        log.warning("%s %s: a query ran past the %g s limit and was cancelled", request.method, request.path,
                    settings.QUERY_TIMEOUT_SECONDS)
        message = (f"this request's database query ran past the server's limit of {settings.QUERY_TIMEOUT_SECONDS:g} s "
                   "(EVOLAB_QUERY_TIMEOUT_SECONDS) and was stopped: narrow it (a step range, fewer runs or words) "
                   "or try again in a while")
        if request.path.startswith("/api/"):
            return error(message, status=503)
        return render(request, "query_timeout.html", {"message": message}, status=503)
