import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The web server keeps PostgreSQL connections in a pool (settings.py): a request no longer pays for a
# new connection. Only here: Celery's prefork children must not inherit a parent's pool.
os.environ.setdefault("EVOLAB_DB_POOL", "1")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from webapp.routing import websocket_urlpatterns  # noqa: E402
from webapp.ws_auth import TokenOrSessionAuth  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": TokenOrSessionAuth(URLRouter(websocket_urlpatterns)),
    }
)
