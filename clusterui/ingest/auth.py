"""Which batches are authentic: the cluster's active ingest keys, and the signature check.

A cluster with an active key accepts only batches signed with one of its active keys. A
cluster with none accepts unsigned batches only while ``INGEST_REQUIRE_SIGNATURE`` is off
(the default in development, off in the demo's trusted loopback setup only if chosen).
"""

import time

from django.conf import settings

from clusterui.ingest.models import IngestKey
from collectors import signing

_CACHE_TTL_S = 30.0
_cache: dict[str, tuple[float, dict[str, str]]] = {}


def active_keys(cluster: str) -> dict[str, str]:
    """{key id: secret} of the cluster's active keys, cached briefly per process."""
    now = time.monotonic()
    hit = _cache.get(cluster)
    if hit and now - hit[0] < _CACHE_TTL_S:
        return hit[1]
    keys = dict(
        IngestKey.objects.filter(cluster=cluster, revoked_at__isnull=True)
        .values_list("key_id", "secret")
    )
    _cache[cluster] = (now, keys)
    return keys


def forget_keys() -> None:
    _cache.clear()


def check_signature(envelope: dict) -> str | None:
    """None when the batch may be stored; otherwise why it is refused."""
    cluster = envelope.get("cluster")
    keys = active_keys(cluster) if isinstance(cluster, str) else {}
    if keys:
        return signing.verify(envelope, keys)
    if settings.INGEST_REQUIRE_SIGNATURE:
        return (f"signature: cluster {str(cluster)[:64]!r} has no active ingest key and "
                "unsigned batches are refused (manage.py ingest_key create CLUSTER)")
    return None
