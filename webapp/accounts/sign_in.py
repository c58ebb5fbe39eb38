"""Sign-in with throttling, at /accounts/login/ and /admin/login/ alike: after LOGIN_MAX_FAILURES failed attempts
for one username from one address (or LOGIN_MAX_FAILURES_PER_ADDRESS for any username from it) within
LOGIN_LOCKOUT_SECONDS of the first, further attempts are refused with 429 and a message saying how long to wait,
without checking the password.

- The username is counted as sign-in reads it (UsernameField: stripped, NFKC-normalised), so "ａｄａ" and " ada "
  count against "ada", whom they would sign in as.
- The address is the one the deployment trusts (client_address): behind TRUSTED_PROXIES proxies, the address the
  outermost of them saw connect; with none, the connection's own. A client's own X-Forwarded-For entries are
  never read.
- Counts live in Redis (the `throttle` cache), shared by every web process, and are raised with INCR, so
  parallel attempts are all counted. If Redis is away sign-in still works, unthrottled, and the failure is logged.
"""
import logging
import math
import time

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.exceptions import ValidationError
from django.forms.forms import NON_FIELD_ERRORS

from webapp.shared_cache import shared_cache

log = logging.getLogger(__name__)

REFUSED = "throttled"  # the error code of a refused attempt


def client_address(request) -> str:
    """The address the deployment trusts for this request.

    Each proxy appends the address it saw connect to X-Forwarded-For, so behind N trusted proxies the N-th entry
    from the right is the client as the outermost proxy saw it; entries further left are whatever the client
    wrote. (daphne's own --proxy-headers takes the leftmost entry, the client's choice: the web image does not
    use it.)"""
    remote = request.META.get("REMOTE_ADDR", "") or "unknown"
    trusted = settings.TRUSTED_PROXIES
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    if trusted <= 0 or not hops:
        return remote
    # fewer entries than proxies: the request came in through the inner ones only; the leftmost is still
    # what a trusted proxy saw
    return hops[-min(trusted, len(hops))]


def _keys(username: str, address: str) -> list[tuple[str, int]]:
    return [(f"login-failures:{address}:{username}", settings.LOGIN_MAX_FAILURES),
            (f"login-failures:{address}", settings.LOGIN_MAX_FAILURES_PER_ADDRESS)]


def seconds_refused(username: str, address: str) -> int:
    """How long sign-in stays refused for this username from this address (0: not refused)."""
    try:
        cache = shared_cache()
        keys = _keys(username, address)
        values = cache.get_many([k for key, _ in keys for k in (key, f"{key}:since")])
        waits = [values.get(f"{key}:since", time.time()) + settings.LOGIN_LOCKOUT_SECONDS - time.time()
                 for key, limit in keys if int(values.get(key) or 0) >= limit]
        return max([math.ceil(w) for w in waits if w > 0], default=0)
    except Exception as exc:  # noqa: BLE001 - Redis away: sign-in must still work
        log.warning("sign-in throttle unavailable: %s", exc)
        return 0


def record_failure(username: str, address: str) -> None:
    try:
        cache = shared_cache()
        for key, _ in _keys(username, address):
            # the window starts at the first failure: `add` writes only where nothing is, INCR is atomic in Redis
            # (a get-then-set lost counts to parallel attempts) and keeps the key's expiry
            cache.add(f"{key}:since", time.time(), timeout=settings.LOGIN_LOCKOUT_SECONDS)
            cache.add(key, 0, timeout=settings.LOGIN_LOCKOUT_SECONDS)
            try:
                cache.incr(key)
            except ValueError:  # expired between add and incr: a new window
                cache.add(key, 1, timeout=settings.LOGIN_LOCKOUT_SECONDS)
    except Exception as exc:  # noqa: BLE001
        log.warning("sign-in throttle unavailable: %s", exc)


def clear(username: str, address: str) -> None:
    try:
        key = _keys(username, address)[0][0]
        shared_cache().delete_many([key, f"{key}:since"])
    except Exception as exc:  # noqa: BLE001
        log.warning("sign-in throttle unavailable: %s", exc)


def refusal(seconds: int) -> str:
    minutes = math.ceil(seconds / 60)
    return (f"Too many failed sign-ins for this account from your address: try again in {minutes} "
            f"minute{'s' if minutes != 1 else ''}.")


class ThrottledForm:
    """Mixin for an AuthenticationForm: a refused attempt fails with REFUSED before the password is checked, a
    failed one is counted, a successful one clears the username's count."""

    def clean(self):
        username = self.cleaned_data.get("username")
        if username is None:  # no username: nothing was checked, nothing to count
            return super().clean()
        address = client_address(self.request)
        wait = seconds_refused(username, address)
        if wait:
            self.refused_for = math.ceil(wait / 60)
            raise ValidationError(refusal(wait), code=REFUSED)
        try:
            cleaned = super().clean()
        except ValidationError:
            record_failure(username, address)
            raise
        clear(username, address)
        return cleaned

    @property
    def refused(self) -> bool:
        return self.has_error(NON_FIELD_ERRORS, REFUSED)


class SignInForm(ThrottledForm, AuthenticationForm):
    pass


class AdminSignInForm(ThrottledForm, AdminAuthenticationForm):
    pass


class SignInView(LoginView):
    authentication_form = SignInForm

    def form_invalid(self, form):
        if not form.refused:
            return super().form_invalid(form)
        return self.render_to_response(self.get_context_data(form=form, refused_for=form.refused_for), status=429)


class ThrottledAdminSite(admin.AdminSite):
    """The admin site (EvolabAdminConfig makes it the default), whose sign-in is throttled like the site's."""
    login_form = AdminSignInForm

    def login(self, request, extra_context=None):
        response = super().login(request, extra_context)
        form = getattr(response, "context_data", None) and response.context_data.get("form")
        if isinstance(form, ThrottledForm) and form.is_bound and form.refused:
            response.status_code = 429
        return response
