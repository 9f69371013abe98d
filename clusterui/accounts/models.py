from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import models


class DirectoryAccount(models.Model):
    """A user that signs in through LDAP (clusterui/accounts/ldap_backend.py), written at
    each sign-in. A user without one is a local account, which LDAP never takes over."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="directory_account")
    dn = models.CharField("directory entry", max_length=512)
    # The scheduler's name for this user (LDAP_SCHEDULER_USER; usually the login itself):
    # the jobs whose ``user`` it is are theirs (JobQuerySet.visible_to).
    scheduler_user = models.CharField(max_length=64)
    synced_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user} ({self.dn})"


def scheduler_user_name(user) -> str:
    """The scheduler's user name for a signed-in user: the directory's mapping for an LDAP
    user, the login for a local one. Without LDAP sign-in every user is local: no lookup
    (the pages' query counts stay as they were)."""
    if not settings.LDAP:
        return user.get_username()
    try:
        return user.directory_account.scheduler_user
    except ObjectDoesNotExist:
        return user.get_username()
