from django.utils.functional import SimpleLazyObject

from .models import ApiToken


class TokenAuthenticationMiddleware:
    """`Authorization: Token KEY` authenticates a request as the token's user.

    Token requests carry no cookies, so CSRF (which protects cookie sessions) is skipped
    for them, as REST frameworks do."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        key = ApiToken.key_from_header(request.META.get("HTTP_AUTHORIZATION", ""))
        if key is not None:
            user = ApiToken.user_for_key(key)
            if user is not None:
                request.user = SimpleLazyObject(lambda: user)
                request._dont_enforce_csrf_checks = True
            request.token_auth_attempted = True
        return self.get_response(request)
