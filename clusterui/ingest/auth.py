"""Which batches are authentic: the cluster's active ingest keys, and the signature check.

A cluster with an active key accepts only batches signed with one of its active keys: with
the key derived for the batch's own node (``hmac-sha256-node``, so a node writes only as
itself), or with the cluster secret itself (``hmac-sha256``) while that key still allows
cluster-wide signatures (``IngestKey.allow_cluster_signatures``: keys from before node keys
do, new keys do not unless created so). A cluster with none accepts unsigned batches only
while ``INGEST_REQUIRE_SIGNATURE`` is off (the default in development).

Both signature versions are accepted (docs/protocol.md): version 2 (``open_batch``: the HMAC
of the bytes received, checked before they are parsed) and, during the transition, version
1 (``check_signature``: the HMAC of the envelope re-serialised).
"""

import time
from dataclasses import dataclass

from django.conf import settings

from clusterui.ingest import typed_decode, validate
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


def _keys_of(cluster) -> ClusterKeys | None:
    # A name no cluster can have (NUL, a lone surrogate, too long) is looked up nowhere:
    # validation refuses it with its reason; the database must not see it first.
    name, _error = validate.text(cluster, 64, required=True)
    return cluster_keys(name) if name is not None else None


def _unsigned(cluster) -> str | None:
    if settings.INGEST_REQUIRE_SIGNATURE:
        return (f"signature: cluster {str(cluster)[:64]!r} has no active ingest key and "
                "unsigned batches are refused (manage.py ingest_key create CLUSTER)")
    return None


def check_signature(envelope: dict) -> str | None:
    """None when the batch (unsigned, or signed with version 1) may be stored; otherwise
    why it is refused."""
    keys = _keys_of(envelope.get("cluster"))
    if keys and keys.secrets:
        return signing.verify(envelope, keys.secrets, keys.cluster_wide)
    return _unsigned(envelope.get("cluster"))


def open_batch(arg) -> tuple[object, str | None, str]:
    """(envelope, refusal or None, key id) for the task's argument, whichever signature
    version it uses. A version 2 argument is checked over the bytes of its text before the
    text is parsed; when refused, the argument itself is returned as the envelope."""
    version = signing.version_of(arg)
    if version is None or version == 1:
        refusal = check_signature(arg) if isinstance(arg, dict) else None
        return arg, refusal, (key_id_of(arg[signing.FIELD]) if version else "")
    if version != signing.VERSION:
        return arg, (f"signature: version {version} is not supported (this server accepts "
                     f"versions 1 and {signing.VERSION})"), ""
    signature, text = arg[signing.FIELD], arg.get(signing.BODY)
    if not isinstance(text, str):
        return arg, (f"signature: version 2 carries the batch as JSON text in "
                     f"{signing.BODY!r}, got {type(text).__name__}"), ""
    keys = _keys_of(signature.get("cluster"))
    signed = bool(keys and keys.secrets)
    if signed:
        refusal = signing.verify_sealed(arg, keys.secrets, keys.cluster_wide)
        if refusal:
            return arg, refusal, ""
    from clusterui.ingest.messages import loads  # messages imports tasks, which imports us

    try:
        envelope = typed_decode.decode(text, loads)
    except ValueError as exc:
        return arg, f"{signing.BODY}: the signed text is not JSON ({exc})", ""
    # Always, verified or not: the cluster whose keys were looked up is the batch's own.
    refusal = signing.mismatch(signature, envelope)
    if refusal is None and not signed:
        refusal = _unsigned(signature.get("cluster"))
    return envelope, refusal, key_id_of(signature)


def key_id_of(signature) -> str:
    """The key id a batch names, as stored for key-rotation progress ("" when none)."""
    if isinstance(signature, dict) and isinstance(signature.get("key_id"), str):
        return signature["key_id"][:64]
    return ""
