from django.db import models


class AccountSource(models.TextChoices):
    """Where a directory account signs in: the site's LDAP directory or its OpenID Connect
    provider (clusterui/accounts/ldap_backend.py, oidc_backend.py)."""

    LDAP = "ldap", "LDAP"
    OIDC = "oidc", "OpenID Connect"
