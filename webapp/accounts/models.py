import hashlib
import secrets

from django.conf import settings
from django.db import models


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    """A token for scripts and CI. Only its SHA-256 is stored, so a database leak does
    not leak usable tokens; the key itself is shown once, when it is created."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    @classmethod
    def issue(cls, user) -> str:
        key = secrets.token_hex(20)
        cls.objects.create(user=user, digest=_digest(key))
        return key

    @classmethod
    def user_for_key(cls, key: str):
        token = cls.objects.select_related("user").filter(digest=_digest(key), user__is_active=True).first()
        return token.user if token else None
