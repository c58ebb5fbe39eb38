from django.contrib.auth.models import AnonymousUser
from django.utils.functional import SimpleLazyObject

from .models import ApiToken


class TokenAuthenticationMiddleware:
    """`Authorization: Token KEY` (or `Bearer KEY`) authenticates a request as the token's user.

    A request that sends a token is authenticated by the token alone: with an invalid one it is anonymous
    whatever session cookie comes with it (the /mlflow views, which skip CSRF because they read no cookie, read the
    session's user beside a wrong token). Token requests are not cookie sessions, so CSRF (which protects those) is
    skipped for a valid one, as REST frameworks do."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        key = ApiToken.key_from_header(request.META.get("HTTP_AUTHORIZATION", ""))
        if key is not None:
            user = ApiToken.user_for_key(key)
            if user is not None:
                request.user = SimpleLazyObject(lambda: user)
                request._dont_enforce_csrf_checks = True
            else:
                request.user = AnonymousUser()
            request.token_auth_attempted = True
        return self.get_response(request)
