"""Sign-in with throttling: after LOGIN_MAX_FAILURES failed attempts for one username from one
address (or LOGIN_MAX_FAILURES_PER_ADDRESS for any username from it) within LOGIN_LOCKOUT_SECONDS,
further attempts are refused with 429 and a message saying how long to wait, without checking the
password. Counts live in Redis (the `throttle` cache), shared by every web process; if Redis is away
sign-in still works, unthrottled, and the failure is logged."""
import logging
import math
import time

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.core.cache import caches

log = logging.getLogger(__name__)


def client_address(request) -> str:
    # behind the production profile's proxy, daphne is given the client's address by its
    # --proxy-headers option; REMOTE_ADDR is what it passes on
    return request.META.get("REMOTE_ADDR", "") or "unknown"


def _keys(username: str, address: str) -> list[tuple[str, int]]:
    return [(f"login-failures:{address}:{username.strip().lower()}", settings.LOGIN_MAX_FAILURES),
            (f"login-failures:{address}", settings.LOGIN_MAX_FAILURES_PER_ADDRESS)]


def seconds_refused(username: str, address: str) -> int:
    """How long sign-in stays refused for this username from this address (0: not refused)."""
    try:
        cache = caches["throttle"]
        waits = []
        for key, limit in _keys(username, address):
            entry = cache.get(key)
            if entry and entry["count"] >= limit:
                waits.append(entry["since"] + settings.LOGIN_LOCKOUT_SECONDS - time.time())
        return max([math.ceil(w) for w in waits if w > 0], default=0)
    except Exception as exc:  # noqa: BLE001 - Redis away: sign-in must still work
        log.warning("sign-in throttle unavailable: %s", exc)
        return 0


def record_failure(username: str, address: str) -> None:
    try:
        cache = caches["throttle"]
        for key, _ in _keys(username, address):
            entry = cache.get(key) or {"count": 0, "since": time.time()}
            entry["count"] += 1
            cache.set(key, entry, timeout=settings.LOGIN_LOCKOUT_SECONDS)
    except Exception as exc:  # noqa: BLE001
        log.warning("sign-in throttle unavailable: %s", exc)


def clear(username: str, address: str) -> None:
    try:
        caches["throttle"].delete(_keys(username, address)[0][0])
    except Exception as exc:  # noqa: BLE001
        log.warning("sign-in throttle unavailable: %s", exc)


class SignInView(LoginView):
    def post(self, request, *args, **kwargs):
        wait = seconds_refused(request.POST.get("username", ""), client_address(request))
        if wait:
            context = self.get_context_data(form=self.get_form_class()(request), refused_for=math.ceil(wait / 60))
            return self.render_to_response(context, status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        record_failure(self.request.POST.get("username", ""), client_address(self.request))
        return super().form_invalid(form)

    def form_valid(self, form):
        clear(self.request.POST.get("username", ""), client_address(self.request))
        return super().form_valid(form)
