"""The production profile: `DJANGO_SETTINGS_MODULE=webapp.settings_production` (docker/compose.yaml).

Everything of webapp/settings.py (which already refuses to start without SECRET_KEY), behind a
reverse proxy that terminates TLS: HTTPS only (redirect, HSTS, secure cookies), the scheme and host
taken from the proxy's headers. `manage.py check --deploy` passes with it
(tests/webapp/test_deploy_settings.py).

EVOLAB_HSTS_SECONDS   Strict-Transport-Security max-age (default one year; 0 turns HSTS off)
EVOLAB_HSTS_PRELOAD   1 (default) to ask browsers' preload lists for the domain: only once HTTPS is
                      there to stay, for every subdomain
"""
import os

from .settings import *  # noqa: F401,F403
from .settings import DEV

DEBUG = False
if DEV:
    raise RuntimeError("webapp.settings_production is not for the demo or the tests (EVOLAB_DEV / PYTEST_VERSION set)")

# the proxy says whether the client came over HTTPS and which host it asked for
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
USE_X_FORWARDED_HOST = True
SECURE_SSL_REDIRECT = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = int(os.environ.get("EVOLAB_HSTS_SECONDS", 365 * 24 * 3600))
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = os.environ.get("EVOLAB_HSTS_PRELOAD", "1") == "1"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
