"""Which batches are authentic: the cluster's active ingest keys, and the signature check.

A cluster with an active key accepts only batches signed with one of its active keys: with
the key derived for the batch's own node (``hmac-sha256-node``, so a node writes only as
itself), or with the cluster secret itself (``hmac-sha256``) while that key still allows
cluster-wide signatures (``IngestKey.allow_cluster_signatures``: keys from before node keys
do, new keys do not unless created so). A cluster with none accepts unsigned batches only
while ``INGEST_REQUIRE_SIGNATURE`` is off (the default in development).
"""

import time
from dataclasses import dataclass

from django.conf import settings

from clusterui.ingest import validate
from clusterui.ingest.models import IngestKey
from collectors import signing

_CACHE_TTL_S = 30.0


@dataclass(frozen=True)
class ClusterKeys:
    secrets: dict[str, str]  # key id -> cluster secret
    cluster_wide: frozenset[str]  # key ids that still accept cluster-wide signatures


_cache: dict[str, tuple[float, ClusterKeys]] = {}


def cluster_keys(cluster: str) -> ClusterKeys:
    """The cluster's active keys, cached briefly per process (a revocation or a change of
    ``allow_cluster_signatures`` applies within ``_CACHE_TTL_S`` on every worker)."""
    now = time.monotonic()
    hit = _cache.get(cluster)
    if hit and now - hit[0] < _CACHE_TTL_S:
        return hit[1]
    rows = list(IngestKey.objects.filter(cluster=cluster, revoked_at__isnull=True)
                .values_list("key_id", "secret", "allow_cluster_signatures"))
    keys = ClusterKeys(secrets={k: s for k, s, _a in rows},
                       cluster_wide=frozenset(k for k, _s, allowed in rows if allowed))
    _cache[cluster] = (now, keys)
    return keys


def forget_keys() -> None:
    _cache.clear()


def check_signature(envelope: dict) -> str | None:
    """None when the batch may be stored; otherwise why it is refused."""
    cluster = envelope.get("cluster")
    # A name no cluster can have (NUL, a lone surrogate, too long) is looked up nowhere:
    # validation refuses it with its reason; the database must not see it first.
    name, _error = validate.text(cluster, 64, required=True)
    keys = cluster_keys(name) if name is not None else None
    if keys and keys.secrets:
        return signing.verify(envelope, keys.secrets, keys.cluster_wide)
    if settings.INGEST_REQUIRE_SIGNATURE:
        return (f"signature: cluster {str(cluster)[:64]!r} has no active ingest key and "
                "unsigned batches are refused (manage.py ingest_key create CLUSTER)")
    return None
