"""Small helpers shared by the JSON API views (DESIGN §4.3)."""
import json
from functools import wraps

from django.core.exceptions import PermissionDenied
from django.http import JsonResponse
from django.http.multipartparser import MAX_TOTAL_HEADER_SIZE, MultiPartParserError
from django.shortcuts import render

from rl.params import FieldError


def error(message: str, status: int = 400, field: str | None = None) -> JsonResponse:
    body = {"error": message}
    if field:
        body["field"] = field
    return JsonResponse(body, status=status)


def api_view(methods):
    """Authenticated JSON endpoint: 401 without a session or valid token, 405 for other
    methods, 403 when the user's role in the object's team is too low. Views stay thin;
    errors are JSON with a 4xx status naming the field (a FieldError raised anywhere below the view), never a
    500 for bad input."""

    def decorator(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if request.method not in methods:
                return error(f"method {request.method} is not allowed here; use {', '.join(methods)}", 405)
            if not request.user.is_authenticated:
                return unauthenticated(request)
            try:
                return view(request, *args, **kwargs)
            except PermissionDenied as exc:
                return error(str(exc) or "you may not do this", 403)
            except FieldError as exc:  # every refused input, wherever it was found
                return error(exc.message, exc.status, field=exc.field)

        wrapper.csrf_exempt = False
        return wrapper

    return decorator


def unauthenticated(request) -> JsonResponse:
    """The API's 401: what an endpoint (api_view) and the CSRF check (csrf_failure) say to a caller it does not know."""
    if getattr(request, "token_auth_attempted", False):
        return error("the API token is not valid", 401)
    return error("sign in or send 'Authorization: Token KEY'", 401)


def csrf_failure(request, reason=""):
    """CSRF_FAILURE_VIEW. Django's CSRF check runs before any view, so a script's POST without credentials (or with a
    token that is not valid: only a valid one waives the check) got Django's HTML 403 instead of the API's JSON 401.
    Under /api/ the answer is what the endpoint would have said, or, for a signed-in session that sent no CSRF token,
    a JSON 403 naming what to send. Pages keep Django's page."""
    from django.views.csrf import csrf_failure as page

    if not request.path.startswith("/api/"):
        return page(request, reason)
    if not request.user.is_authenticated:
        return unauthenticated(request)
    return error(f"the CSRF check failed ({reason}): a signed-in session sends its csrftoken cookie's value as the "
                 "X-CSRFToken header; a script sends 'Authorization: Token KEY' instead", 403)


def by_method(**views):
    """One URL, a view per HTTP method (each still checks its own), e.g. a run's rollouts read and reported."""
    default = next(iter(views.values()))

    def dispatch(request, *args, **kwargs):
        return views.get(request.method, default)(request, *args, **kwargs)

    return dispatch


def only_params(params, known, what: str) -> None:
    """Refuse a query parameter `what` does not read (a FieldError naming it and the ones it takes): ignored, a
    mistyped filter (`step=40` for `step_min`/`step_max`) gave every row with nothing to say so."""
    for name in params:
        if name not in known:
            raise FieldError(name, f"unknown parameter {name[:100]!r}: {what} takes {', '.join(known)}")


def json_body(request) -> dict:
    """The request's JSON object; raises FieldError (no field) with a readable message. A form
    post (multipart or urlencoded) is read as its fields, so `curl -F` works too."""
    if request.content_type in ("multipart/form-data", "application/x-www-form-urlencoded"):
        return request.POST.dict()
    if not request.body:
        return {}
    try:
        data = json.loads(request.body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FieldError(None, f"the request body is not valid JSON: {exc}") from None
    except RecursionError:  # Python's parser recurses once per level: [[[[...]]]] 100,000 deep was a 500
        raise FieldError(None, "the request body's JSON is nested more deeply than Python's parser can read "
                               "(no launch field is nested more than two levels)") from None
    if not isinstance(data, dict):
        raise FieldError(None, "the request body must be a JSON object")
    return data


def server_error(request):
    """handler500: the API promises JSON, so an unexpected failure under /api/ is a JSON 500 (the
    traceback goes to the log, as Django logs every 500); pages keep Django's HTML page."""
    from django.views import defaults

    if request.path.startswith("/api/"):
        return error("the server failed on this request; the error is in its log", 500)
    return defaults.server_error(request)


def not_found(request, exception=None):
    """handler404: a JSON 404 under /api/ (an unknown endpoint or object), Django's page elsewhere."""
    from django.views import defaults

    if request.path.startswith("/api/"):
        return error(f"nothing at {request.path}", 404)
    return defaults.page_not_found(request, exception)


# Django's form parser refuses a part whose headers pass 1,024 bytes (MAX_TOTAL_HEADER_SIZE). In an upload that is
# the file's name: Content-Disposition carries it whole, so a name of about 950 characters is enough.
PART_HEADERS_TOO_LONG = ("the file name is too long: a form part's headers (its file name among them) may be at "
                         f"most {MAX_TOTAL_HEADER_SIZE:,} bytes; rename the file to under 255 characters")


def bad_request(request, exception=None):
    """handler400 (a malformed request Django itself refused): JSON under /api/, the site's page elsewhere, each
    saying what is wrong where Django's error tells it."""
    from django.views import defaults

    too_long = isinstance(exception, MultiPartParserError) and "header size" in str(exception)
    reason = PART_HEADERS_TOO_LONG if too_long else "the request is malformed"
    if request.path.startswith("/api/"):
        return error(reason, 400, field="file" if too_long else None)
    try:  # the site's page with its navigation (Django's own renders the template without the request's context)
        return render(request, "400.html", {"reason": reason if too_long else ""}, status=400)
    except Exception:  # noqa: BLE001 - a request too broken for the page's context still gets a plain 400
        return defaults.bad_request(request, exception)
