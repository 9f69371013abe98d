"""Which jobs a signed-in user may see: the one rule behind ``Job.objects.visible_to`` (and
so findings, the job pages, the API, CSV exports and jobstats), the overview's GPU grid,
the usage sums and the trends.

Staff see every job. Anyone else sees

- the jobs of their scheduler name (``scheduler_user_name``: the login, or for an LDAP user
  the name LDAP_SCHEDULER_USER maps it to) on every cluster where no ``ClusterLogin`` names
  another one for them; on a cluster where one does, the jobs of that name there, and not
  those of their usual name (someone else's on that cluster);
- every job of the accounts they lead: ``ACCOUNT_LEADERS`` (an account on every cluster,
  or ``cluster/account`` on that cluster only), and for an LDAP user the accounts of their
  directory groups named ``LDAP_ACCOUNT_LEADER_GROUP_PREFIX`` + account (on every cluster).

The rule is worked out once per user object (one query, the user's ``ClusterLogin`` rows;
staff need none) and expressed both as a ``Q`` for the ORM and as SQL for the raw queries.
"""

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Q

from clusterui.accounts.models import ClusterLogin, scheduler_user_name


@dataclass(frozen=True)
class Rule:
    name: str  # the usual scheduler name
    per_cluster: tuple[tuple[int, str], ...] = ()  # (cluster id, name there)
    accounts: tuple[str, ...] = ()  # led on every cluster
    cluster_accounts: tuple[tuple[str, str], ...] = ()  # (cluster name, account) led there

    def q(self, prefix: str = "") -> Q:
        """The jobs of this rule, for a queryset of jobs (``prefix``: the path to the job
        from another model, e.g. ``"job__"``)."""
        from clusterui.inventory.models import Cluster

        own = Q(**{f"{prefix}user": self.name})
        if self.per_cluster:
            own &= ~Q(**{f"{prefix}cluster_id__in": [c for c, _ in self.per_cluster]})
        rule = own
        for cluster_id, name in self.per_cluster:
            rule |= Q(**{f"{prefix}cluster_id": cluster_id, f"{prefix}user": name})
        if self.accounts:
            rule |= Q(**{f"{prefix}account__in": list(self.accounts)})
        for cluster, account in self.cluster_accounts:
            rule |= Q(**{f"{prefix}account": account,
                         f"{prefix}cluster_id__in": Cluster.objects.filter(name=cluster)
                         .values("id")})
        return rule

    def sql(self, alias: str) -> tuple[str, dict]:
        """The same rule as a SQL condition on the jobs table aliased ``alias``, with its
        named parameters (all prefixed ``vis_``)."""
        params = {"vis_name": self.name}
        own = f'{alias}."user" = %(vis_name)s'
        parts = []
        if self.per_cluster:
            params["vis_cids"] = [c for c, _ in self.per_cluster]
            params["vis_cnames"] = [n for _, n in self.per_cluster]
            own += f" AND NOT ({alias}.cluster_id = ANY(%(vis_cids)s))"
            parts.append(f'({alias}.cluster_id, {alias}."user") IN (SELECT * FROM '
                         f"unnest(%(vis_cids)s::bigint[], %(vis_cnames)s::text[]))")
        parts.insert(0, f"({own})")
        if self.accounts:
            params["vis_accounts"] = list(self.accounts)
            parts.append(f"{alias}.account = ANY(%(vis_accounts)s)")
        if self.cluster_accounts:
            params["vis_ca_clusters"] = [c for c, _ in self.cluster_accounts]
            params["vis_ca_accounts"] = [a for _, a in self.cluster_accounts]
            parts.append(
                f"({alias}.cluster_id, {alias}.account) IN (SELECT vc.id, va.account FROM "
                f"unnest(%(vis_ca_clusters)s::text[], %(vis_ca_accounts)s::text[]) "
                f"AS va(cluster, account) JOIN inventory_cluster vc ON vc.name = va.cluster)")
        return "(" + " OR ".join(parts) + ")", params


def led_accounts(user) -> set[tuple[str | None, str]]:
    """``(cluster name or None for every cluster, account)`` the user leads."""
    led = set(settings.ACCOUNT_LEADERS.get(user.get_username(), ()))
    if settings.LDAP or settings.OIDC:  # from the directory's or the provider's groups
        try:
            led.update((None, a) for a in user.directory_account.led_accounts)
        except ObjectDoesNotExist:  # a local user
            pass
    return led


def led_labels(user) -> list[str]:
    """The accounts the user leads, as the pages name them (``gpu-b/vision`` for one led
    on one cluster); empty for staff and for anyone who leads none."""
    rule = rule_for(user) if user.is_authenticated else None
    if rule is None:
        return []
    return [*rule.accounts, *(f"{c}/{a}" for c, a in rule.cluster_accounts)]


def rule_for(user) -> Rule | None:
    """The user's rule, or None for staff (every job). Only for signed-in users. Kept on
    the user object: a request works it out once."""
    if user.is_staff:
        return None
    cached = getattr(user, "_clusterui_visibility", None)
    if cached is not None:
        return cached
    led = led_accounts(user)
    rule = Rule(
        name=scheduler_user_name(user),
        per_cluster=tuple(ClusterLogin.objects.filter(user=user).order_by("cluster_id")
                          .values_list("cluster_id", "scheduler_user")),
        accounts=tuple(sorted(a for c, a in led if c is None)),
        cluster_accounts=tuple(sorted((c, a) for c, a in led if c is not None)),
    )
    user._clusterui_visibility = rule
    return rule


def context(request):
    """``led_accounts`` for the templates ("your jobs and those of nlp"), worked out only
    where a template reads it (a callable: the pages that never do make no query)."""
    return {"led_accounts": lambda: led_labels(request.user)}
