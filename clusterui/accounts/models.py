from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import models

from clusterui.accounts.choices import AccountSource


class DirectoryAccount(models.Model):
    """A user that signs in through the site's identity: LDAP (clusterui/accounts/
    ldap_backend.py) or OpenID Connect (oidc_backend.py), written at each sign-in. A user
    without one is a local account, which neither ever takes over."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="directory_account")
    source = models.CharField(max_length=8, choices=AccountSource.choices,
                              default=AccountSource.LDAP)
    # LDAP: the entry's DN. OpenID Connect: "<issuer>#<sub>", the provider's stable name
    # for the person (a login name may change or be reused; the subject may not).
    dn = models.CharField("identity at the source", max_length=512)
    # The scheduler's name for this user (LDAP_SCHEDULER_USER; usually the login itself):
    # the jobs whose ``user`` it is are theirs (JobQuerySet.visible_to).
    scheduler_user = models.CharField(max_length=64)
    synced_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            # An OpenID Connect sign-in finds its account by (source, issuer#subject).
            models.Index(fields=["source", "dn"], name="directory_account_identity"),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.dn})"


def scheduler_user_name(user) -> str:
    """The scheduler's user name for a signed-in user: the mapping for an LDAP or OIDC
    user, the login for a local one. Without LDAP or OIDC sign-in every user is local: no
    lookup (the pages' query counts stay as they were)."""
    if not (settings.LDAP or settings.OIDC):
        return user.get_username()
    try:
        return user.directory_account.scheduler_user
    except ObjectDoesNotExist:
        return user.get_username()
