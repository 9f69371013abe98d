"""Per-user API tokens.

Only a SHA-256 hash of each key is stored: a database dump does not hand out working
keys. The key's first characters (``prefix``) are kept in clear so a user can tell their
tokens apart. See ``clusterui.api.tokens`` for how keys are made and checked.
"""

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="api_tokens")
    name = models.CharField(max_length=64, help_text="What the token is for, e.g. 'laptop'")
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # Every authenticated API request looks its token up by the key's hash.
            models.UniqueConstraint(fields=["key_hash"], name="apitoken_key_hash_uniq"),
        ]
        indexes = [
            # The token page lists a user's tokens, newest first.
            models.Index(fields=["user", "-created_at"], name="apitoken_user_created_idx"),
        ]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"
