import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The web server keeps PostgreSQL connections in a pool (settings.py): a request no longer pays for a
# new connection. Only the web server: the flag is dropped once the settings have read it, so no
# process started from this one (a test suite's Celery worker) inherits it.
_we_set_the_pool_flag = "EVOLAB_DB_POOL" not in os.environ
os.environ.setdefault("EVOLAB_DB_POOL", "1")

from django.conf import settings  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

from webapp import body_limit  # noqa: E402
from webapp.http_bridge import WSGIBridge  # noqa: E402

# an oversized request body is refused before daphne reads it (webapp/body_limit.py says why)
body_limit.install(settings.REQUEST_BODY_MAX_BYTES)

# HTTP runs through Django's WSGI handler, each request whole on one of a pool of threads (a2wsgi).
# Our views and middleware are synchronous; under Django's ASGI handler a request hopped between
# the event loop and one shared thread eight or so times (the request signals, WhiteNoise and the
# token middleware, which are sync-only, the async-capable middleware after them, the CSRF view
# hook, the view), which cost more than the metrics API's own work, and a slow request held up
# every other. A response streams from its thread as it is produced (webapp/http_bridge.py: and stops
# when its client goes away). WebSockets stay on Channels.
django_http_app = WSGIBridge(get_wsgi_application(), workers=settings.HTTP_THREADS,
                             download_workers=settings.HTTP_DOWNLOAD_THREADS)
settings.DATABASES  # read now, while the flag is set
if _we_set_the_pool_flag:
    del os.environ["EVOLAB_DB_POOL"]

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from webapp.routing import websocket_urlpatterns  # noqa: E402
from webapp.ws_auth import TokenOrSessionAuth  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_http_app,
        "websocket": TokenOrSessionAuth(URLRouter(websocket_urlpatterns)),
    }
)
