import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The web server keeps PostgreSQL connections in a pool (settings.py): a request no longer pays for a
# new connection. Only the web server: the flag is dropped once the settings have read it, so no
# process started from this one (a test suite's Celery worker) inherits it.
_we_set_the_pool_flag = "EVOLAB_DB_POOL" not in os.environ
os.environ.setdefault("EVOLAB_DB_POOL", "1")

from django.conf import settings  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()
settings.DATABASES  # read now, while the flag is set
if _we_set_the_pool_flag:
    del os.environ["EVOLAB_DB_POOL"]

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from webapp.routing import websocket_urlpatterns  # noqa: E402
from webapp.ws_auth import TokenOrSessionAuth  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": TokenOrSessionAuth(URLRouter(websocket_urlpatterns)),
    }
)
