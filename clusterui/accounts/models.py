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
    # The accounts this user leads, from the groups named LDAP_ACCOUNT_LEADER_GROUP_PREFIX
    # (or OIDC_ACCOUNT_LEADER_GROUP_PREFIX) + account, written at each sign-in: they see
    # those accounts' jobs (clusterui/jobs/visibility.py).
    led_accounts = models.JSONField(default=list, blank=True)
    synced_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            # An OpenID Connect sign-in finds its account by (source, issuer#subject).
            models.Index(fields=["source", "dn"], name="directory_account_identity"),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.dn})"


class ClusterLogin(models.Model):
    """A user's scheduler name on one cluster, where it is not their usual one
    (``scheduler_user_name``): on that cluster the jobs of this name are theirs, and the jobs
    of their usual name are someone else's. Without a row, a cluster uses the usual name."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="cluster_logins")
    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE,
                                related_name="+")
    scheduler_user = models.CharField(max_length=64)

    class Meta:
        ordering = ["cluster__name"]
        constraints = [
            # One name per user and cluster; read per user (jobs/visibility.py).
            models.UniqueConstraint(fields=["user", "cluster"],
                                    name="clusterlogin_user_cluster_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.user} on {self.cluster_id}: {self.scheduler_user}"


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


def owner_of(cluster_id: int, name: str):
    """The user whose scheduler name on the cluster ``cluster_id`` is ``name`` (the reverse
    of ``scheduler_user_name`` with ``ClusterLogin``), or None: who a job belongs to, for its
    alert emails. A ``ClusterLogin`` for that cluster wins; then, with LDAP or OpenID
    Connect sign-in, the directory's mapping; then the local user of that login. A user who has another name on
    that cluster is never the owner of their usual name's jobs there."""
    from django.contrib.auth import get_user_model

    if not name:
        return None
    User = get_user_model()
    users = User._default_manager
    mapped = users.filter(cluster_logins__cluster_id=cluster_id,
                          cluster_logins__scheduler_user=name).first()
    if mapped is not None:
        return mapped
    elsewhere = ClusterLogin.objects.filter(cluster_id=cluster_id).values("user_id")
    candidates = users.exclude(pk__in=elsewhere)
    if settings.LDAP or settings.OIDC:
        directory = candidates.filter(directory_account__scheduler_user=name).first()
        if directory is not None:
            return directory
        candidates = candidates.filter(directory_account__isnull=True)
    return candidates.filter(**{User.USERNAME_FIELD: name}).first()
