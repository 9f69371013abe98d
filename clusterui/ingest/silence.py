"""Nodes gone silent: no batch for NODE_SILENT_AFTER_S. The admins get one email per node
per silence (several nodes that fall silent together share one email)."""

import datetime as dt
import logging

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from clusterui.inventory.models import Node, heard_at

log = logging.getLogger(__name__)
FORGET_AFTER = dt.timedelta(days=7)  # a node silent this long is decommissioned, not news


def silent_nodes(now: dt.datetime | None = None, cluster: str = ""):
    """Nodes whose last batch *arrived* over ``NODE_SILENT_AFTER_S`` ago. Arrival, not data
    time: a node back-filling its history or replaying its spool sends old samples and is
    not silent. (Nodes with no arrival time recorded yet are judged on their data time.)"""
    now = now or timezone.now()
    silent_since = now - dt.timedelta(seconds=settings.NODE_SILENT_AFTER_S)
    nodes = Node.objects.filter(cluster__name=cluster) if cluster else Node.objects
    return nodes.select_related("cluster").annotate(
        heard=heard_at(),
    ).filter(heard__lt=silent_since, heard__gte=now - FORGET_AFTER).order_by(
        "cluster__name", "name")


def alert_silent_nodes(now: dt.datetime | None = None) -> list[str]:
    """Email the admins about nodes that fell silent since they were last alerted about
    them; returns the nodes' names. Each node is claimed before sending, so two workers
    never announce the same silence."""
    now = now or timezone.now()
    fresh = silent_nodes(now).filter(
        Q(silent_alerted_at__isnull=True) | Q(silent_alerted_at__lt=F("heard")))
    claimed = []
    for node in fresh:
        previous = node.silent_alerted_at
        won = Node.objects.filter(pk=node.pk, silent_alerted_at=previous).update(
            silent_alerted_at=now)
        if won == 1:
            claimed.append((node, previous))
    if not claimed:
        return []
    recipients = [email for _, email in settings.ADMINS]
    if not recipients:
        log.warning("%d node(s) went silent but ADMIN_EMAILS is empty: %s", len(claimed),
                    ", ".join(n.name for n, _ in claimed))
        return [n.name for n, _ in claimed]
    context = {
        "nodes": [{"name": n.name, "cluster": n.cluster.name, "last_seen": n.heard,
                   "silent_for": now - n.heard} for n, _ in claimed],
        "silent_after_s": settings.NODE_SILENT_AFTER_S,
        "health_url": settings.SITE_URL + "/ingest/health/",
    }
    from clusterui.alerts.emails import make_message  # the one three-template renderer

    try:
        for to in recipients:
            make_message("node-silent", to, context, {}).send()
    except Exception:
        for node, previous in claimed:  # give the claim back: the next run tries again
            Node.objects.filter(pk=node.pk, silent_alerted_at=now).update(
                silent_alerted_at=previous)
        raise
    return [n.name for n, _ in claimed]
