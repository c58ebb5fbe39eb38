from django.contrib.auth.models import AnonymousUser
from django.http import HttpResponse
from django.utils.functional import SimpleLazyObject

from .models import ApiToken

# Where an API token signs a request in: the JSON API and the MLflow protocol, which scripts call. The pages are
# for people: a token posted to /account/ changed the email and minted tokens that outlived its own revocation.
TOKEN_PATHS = ("/api/", "/mlflow/")
PAGES_REFUSE_TOKENS = ("API tokens work for the API (/api/) and the MLflow protocol (/mlflow/) only; "
                       "sign in to use the pages.\n")


class TokenAuthenticationMiddleware:
    """`Authorization: Token KEY` (or `Bearer KEY`) authenticates a request to the API as the token's user; a page
    answers it 403.

    A request that sends a token is authenticated by the token alone: with an invalid one it is anonymous
    whatever session cookie comes with it (the /mlflow views, which skip CSRF because they read no cookie, read the
    session's user beside a wrong token). Token requests are not cookie sessions, so CSRF (which protects those) is
    skipped for a valid one, as REST frameworks do."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        key = ApiToken.key_from_header(header)
        if key is not None and not request.path.startswith(TOKEN_PATHS):
            # A page never reads the token. Evolab's own scheme gets a 403 saying where tokens work; a Bearer
            # header may be a sign-in proxy's in front of the pages, so it is merely ignored.
            if header.lower().startswith("token "):
                return HttpResponse(PAGES_REFUSE_TOKENS, status=403, content_type="text/plain; charset=utf-8")
            key = None
        if key is not None:
            user = ApiToken.user_for_key(key)
            if user is not None:
                request.user = SimpleLazyObject(lambda: user)
                request._dont_enforce_csrf_checks = True
            else:
                request.user = AnonymousUser()
            request.token_auth_attempted = True
        return self.get_response(request)
