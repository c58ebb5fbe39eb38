"""WebSocket authentication (DESIGN §4.3): a browser's session cookie with its Origin
checked against ALLOWED_HOSTS, or, for scripts, `Authorization: Token KEY` with no
Origin needed. A token is not sent by the browser on its own, so a page of another site
cannot ride on it; that is why the Origin check is only for cookie sessions."""
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.security.websocket import AllowedHostsOriginValidator


def _token_key(scope) -> str | None:
    from webapp.accounts.models import ApiToken

    header = dict(scope.get("headers", [])).get(b"authorization", b"")
    return ApiToken.key_from_header(header.decode("latin-1"))


@database_sync_to_async
def _user_for_key(key):
    from django.contrib.auth.models import AnonymousUser

    from webapp.accounts.models import ApiToken

    return ApiToken.user_for_key(key) or AnonymousUser()


class TokenOrSessionAuth:
    def __init__(self, inner):
        self.by_token = inner
        self.by_session = AllowedHostsOriginValidator(AuthMiddlewareStack(inner))

    async def __call__(self, scope, receive, send):
        key = _token_key(scope)
        if key is None:
            return await self.by_session(scope, receive, send)
        # A bad token is an anonymous user: the consumer closes the socket, never a fallback to cookies. The key
        # stays in the scope so the consumer can re-check it when told the user's access changed.
        scope = dict(scope, user=await _user_for_key(key), token_key=key)
        return await self.by_token(scope, receive, send)
