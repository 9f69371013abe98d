"""HMAC signatures on batches: a batch carries the HMAC of its envelope, so the server can
refuse batches from anyone who can merely reach Redis, and a node can write only as itself.

The signed bytes are the envelope without its ``signature`` member, serialised as
canonical JSON: keys sorted, no whitespace, UTF-8, Python's shortest round-trip floats.
The server uses this same module to verify.

Two schemes, named by the signature's ``alg``:

- ``hmac-sha256-node`` (node keys): each node holds only its own key, derived from the
  cluster's secret and the node's name (``derive_node_key``: HKDF-SHA256, RFC 5869). It
  signs batches whose ``node`` is that name and no other, so a node that is broken into can
  lie only about itself. The signature names the node it was made for.
- ``hmac-sha256`` (cluster-wide, the original scheme): the cluster's secret itself signs,
  for any node of the cluster. The server accepts it only from keys that still allow it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import struct
from collections.abc import Callable, Container

FIELD = "signature"
ALGORITHM = "hmac-sha256"  # cluster-wide: the cluster secret signs any node's batches
NODE_ALGORITHM = "hmac-sha256-node"  # node-scoped: a derived key signs one node's batches
# A derived node key is this prefix and 32 bytes in unpadded base64url: the collector (and
# anything else holding it) can tell it from a cluster secret and picks the node scheme.
NODE_KEY_PREFIX = "cuin1."
_HKDF_SALT = b"clusterui ingest node key"
_HKDF_INFO = b"clusterui node key v1"


def hkdf_sha256(ikm: bytes, salt: bytes, info: bytes, length: int = 32) -> bytes:
    """HKDF with SHA-256 (RFC 5869): extract a pseudorandom key, expand it to ``length``."""
    if not 0 < length <= 255 * 32:
        raise ValueError("HKDF-SHA256 output length must be 1..8160 bytes")
    prk = hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()
    okm, block, counter = b"", b"", 1
    while len(okm) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        okm += block
        counter += 1
    return okm[:length]


def _field(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack(">I", len(raw)) + raw


@functools.lru_cache(maxsize=65536)
def derive_node_key(cluster_secret: str, cluster: str, node: str) -> str:
    """The node's own key: HKDF-SHA256 with the cluster secret (UTF-8) as input key material,
    salt ``b"clusterui ingest node key"``, info ``b"clusterui node key v1"`` followed by the
    cluster name and the node name, each as a 4-byte big-endian length and its UTF-8 bytes;
    32 bytes out, written as ``cuin1.`` + unpadded base64url."""
    if not isinstance(cluster, str) or not isinstance(node, str) or not cluster or not node:
        raise ValueError("a node key needs a cluster name and a node name")
    okm = hkdf_sha256(cluster_secret.encode("utf-8"), _HKDF_SALT,
                      _HKDF_INFO + _field(cluster) + _field(node))
    return NODE_KEY_PREFIX + base64.urlsafe_b64encode(okm).rstrip(b"=").decode("ascii")


def is_node_key(secret: str) -> bool:
    return secret.startswith(NODE_KEY_PREFIX)


def well_formed_node_key(secret: str) -> bool:
    """A whole derived key: the prefix and 32 bytes (43 base64url characters)."""
    body = secret[len(NODE_KEY_PREFIX):]
    if not is_node_key(secret) or len(body) != 43:
        return False
    try:
        return len(base64.urlsafe_b64decode(body + "=")) == 32
    except ValueError:
        return False


def canonical(envelope: dict) -> bytes:
    body = {k: v for k, v in envelope.items() if k != FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass")


def digest(envelope: dict, secret: str) -> str:
    return hmac.new(secret.encode("utf-8"), canonical(envelope), hashlib.sha256).hexdigest()


def sign(envelope: dict, key_id: str, secret: str) -> dict:
    """Add (or replace) the envelope's signature, in place; returns the envelope.

    A node key (``cuin1.…``) signs with the node scheme and names its node (the envelope's,
    which it must be made for: the server refuses it otherwise); a cluster secret signs
    cluster-wide."""
    envelope.pop(FIELD, None)
    mac = digest(envelope, secret)
    if is_node_key(secret):
        envelope[FIELD] = {"key_id": key_id, "alg": NODE_ALGORITHM,
                           "node": envelope.get("node"), "hmac": mac}
    else:
        envelope[FIELD] = {"key_id": key_id, "alg": ALGORITHM, "hmac": mac}
    return envelope


def node_signer(key_id: str, cluster_secret: str) -> Callable[[dict], dict]:
    """For a holder of the cluster secret that sends as many nodes (the simulator): signs
    each envelope with the derived key of the node it names."""
    def sign_as_its_node(envelope: dict) -> dict:
        key = derive_node_key(cluster_secret, envelope["cluster"], envelope["node"])
        return sign(envelope, key_id, key)

    return sign_as_its_node


def verify(envelope: dict, secrets_by_key_id: dict[str, str],
           cluster_wide: Container[str] | None = None) -> str | None:
    """None when the envelope is signed by one of these keys; otherwise the reason.

    ``secrets_by_key_id`` holds cluster secrets; a node signature is checked against the key
    derived from one for the envelope's own cluster and node. ``cluster_wide``: the key ids
    whose cluster-wide signatures are still accepted (None: all of them)."""
    signature = envelope.get(FIELD)
    if signature is None:
        return "signature: missing (this cluster requires signed batches)"
    if not isinstance(signature, dict):
        return "signature: must be an object with key_id, alg and hmac"
    key_id, alg, mac = signature.get("key_id"), signature.get("alg"), signature.get("hmac")
    if alg not in (NODE_ALGORITHM, ALGORITHM):
        return f"signature: alg must be {NODE_ALGORITHM!r} or {ALGORITHM!r}"
    if not isinstance(key_id, str) or key_id not in secrets_by_key_id:
        return f"signature: key id {str(key_id)[:40]!r} is not an active key of this cluster"
    if not isinstance(mac, str):
        return "signature: hmac must be a hex string"
    secret = secrets_by_key_id[key_id]
    if alg == ALGORITHM:
        if cluster_wide is not None and key_id not in cluster_wide:
            return (f"signature: key id {key_id!r} accepts only node keys (alg "
                    f"{NODE_ALGORITHM!r}); its cluster-wide signatures are turned off")
        what = f"key id {key_id!r}"
    else:
        cluster, node, signed_for = (envelope.get("cluster"), envelope.get("node"),
                                     signature.get("node"))
        if not isinstance(node, str) or not node:
            return "signature: a node signature needs the envelope's node name"
        if signed_for != node:
            return (f"signature: made with the node key of {str(signed_for)[:64]!r}, but the "
                    f"batch says node {node[:64]!r}: a node key signs only its own node")
        try:
            secret = derive_node_key(secret, cluster, node)
        except (TypeError, ValueError):
            return "signature: no node key can be derived for this cluster and node name"
        what = f"node key of {node[:64]!r}, key id {key_id!r}"
    try:
        expected = digest(envelope, secret)
    except (TypeError, ValueError):
        return "signature: the envelope cannot be serialised to verify it"
    if not hmac.compare_digest(expected, mac):
        if alg == NODE_ALGORITHM:
            return (f"signature: does not match ({what}): altered, or not signed with this "
                    "node's own key")
        return f"signature: does not match ({what}): altered or wrong key"
    return None
