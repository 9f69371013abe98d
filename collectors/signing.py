"""HMAC signatures on batches: a batch carries the HMAC of its envelope, so the server can
refuse batches from anyone who can merely reach Redis, and a node can write only as itself.

Two versions of what is signed (docs/protocol.md, "Signatures"):

- **version 2** (``seal``; what collectors send): the envelope is serialised once, and the
  HMAC covers exactly those bytes. The task's argument is ``{"batch": <that JSON text>,
  "signature": {"v": 2, ...}}``; the server checks the HMAC over the text it received
  before it parses it (``verify_sealed``), so it never serialises anything again.
- **version 1** (``sign``; accepted during the transition): the signature is a member of
  the envelope, and the signed bytes are the envelope without it, re-serialised as
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
    """For a holder of the cluster secret that sends as many nodes (the simulator): seals
    each envelope (version 2) with the derived key of the node it names."""
    def sign_as_its_node(envelope: dict) -> dict:
        key = derive_node_key(cluster_secret, envelope["cluster"], envelope["node"])
        return seal(envelope, key_id, key)

    return sign_as_its_node


# --- version 2: the HMAC of the bytes sent ---------------------------------------------

VERSION = 2
BODY = "batch"  # version 2: the member holding the envelope's JSON text


def body_bytes(text: str) -> bytes:
    """The bytes a sealed batch's text stands for (a lone surrogate kept as it was sent)."""
    return text.encode("utf-8", "surrogatepass")


def seal(envelope: dict, key_id: str, secret: str) -> dict:
    """The task argument that carries ``envelope`` signed with version 2: the envelope's
    JSON text (serialised once, here) and the HMAC-SHA256 of its UTF-8 bytes.

    The signature names the cluster (and, for a node key, the node) so that the server
    finds the key before it parses anything; it refuses the batch when the envelope inside
    names another. ``envelope`` itself is left unsigned (an old ``signature`` is dropped)."""
    envelope.pop(FIELD, None)
    text = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False)
    mac = hmac.new(secret.encode("utf-8"), body_bytes(text), hashlib.sha256).hexdigest()
    signature = {"v": VERSION, "key_id": key_id, "alg": ALGORITHM,
                 "cluster": envelope.get("cluster"), "hmac": mac}
    if is_node_key(secret):
        signature.update(alg=NODE_ALGORITHM, node=envelope.get("node"))
    return {BODY: text, FIELD: signature}


def version_of(arg) -> int | None:
    """Which signature version a task argument uses: 2 for a sealed batch (its signature
    says ``"v": 2``), 1 for an envelope that carries its signature, None when unsigned.
    Any other ``v`` is returned as given, for the server to refuse."""
    if not isinstance(arg, dict) or not isinstance(arg.get(FIELD), dict):
        return None
    version = arg[FIELD].get("v", 1)
    return version if isinstance(version, int) and not isinstance(version, bool) else -1


def verify_sealed(sealed: dict, secrets_by_key_id: dict[str, str],
                  cluster_wide: Container[str] | None = None) -> str | None:
    """None when ``sealed`` (a version 2 argument) carries the HMAC of its text's bytes
    under one of these keys; otherwise the reason. Parses nothing: the caller then parses
    the text and holds the envelope to the cluster and node named here (``mismatch``)."""
    signature, text = sealed.get(FIELD), sealed.get(BODY)
    if not isinstance(signature, dict):
        return "signature: must be an object with key_id, alg and hmac"
    if not isinstance(text, str):
        return (f"signature: version 2 carries the batch as JSON text in {BODY!r}, got "
                f"{type(text).__name__}")
    found = _key(signature, signature.get("cluster"), signature.get("node"),
                 secrets_by_key_id, cluster_wide)
    if isinstance(found, str):
        return found
    secret, what = found
    try:
        data = body_bytes(text)
    except UnicodeEncodeError:
        return "signature: the batch text is not UTF-8"
    expected = hmac.new(secret.encode("utf-8"), data, hashlib.sha256).hexdigest()
    return _compare(expected, signature, what)


def mismatch(signature: dict, envelope) -> str | None:
    """Why a verified version 2 signature does not cover this envelope (it names another
    cluster or, for a node key, another node); None when it does."""
    if not isinstance(envelope, dict):
        return None  # validation refuses a batch that is not an object, with its reason
    cluster, node = envelope.get("cluster"), envelope.get("node")
    if signature.get("cluster") != cluster:
        return (f"signature: made for cluster {str(signature.get('cluster'))[:64]!r}, but "
                f"the batch says cluster {str(cluster)[:64]!r}")
    if signature.get("alg") == NODE_ALGORITHM and signature.get("node") != node:
        return (f"signature: made with the node key of {str(signature.get('node'))[:64]!r}, "
                f"but the batch says node {str(node)[:64]!r}: a node key signs only its "
                "own node")
    return None


# --- version 1: the HMAC of the envelope re-serialised ------------------------------------

def verify(envelope: dict, secrets_by_key_id: dict[str, str],
           cluster_wide: Container[str] | None = None) -> str | None:
    """None when the envelope is signed (version 1) by one of these keys; otherwise the
    reason.

    ``secrets_by_key_id`` holds cluster secrets; a node signature is checked against the key
    derived from one for the envelope's own cluster and node. ``cluster_wide``: the key ids
    whose cluster-wide signatures are still accepted (None: all of them)."""
    signature = envelope.get(FIELD)
    if signature is None:
        return "signature: missing (this cluster requires signed batches)"
    if not isinstance(signature, dict):
        return "signature: must be an object with key_id, alg and hmac"
    found = _key(signature, envelope.get("cluster"), envelope.get("node"), secrets_by_key_id,
                 cluster_wide)
    if isinstance(found, str):
        return found
    secret, what = found
    try:
        expected = digest(envelope, secret)
    except (TypeError, ValueError):
        return "signature: the envelope cannot be serialised to verify it"
    return _compare(expected, signature, what)


def _key(signature: dict, cluster, node, secrets_by_key_id: dict[str, str],
         cluster_wide: Container[str] | None) -> tuple[str, str] | str:
    """(the HMAC key, how to name it) for this signature of a batch from ``cluster`` and
    ``node``; or why there is none."""
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
        signed_for = signature.get("node")
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
    return secret, what


def _compare(expected: str, signature: dict, what: str) -> str | None:
    if not hmac.compare_digest(expected, signature["hmac"]):
        if signature.get("alg") == NODE_ALGORITHM:
            return (f"signature: does not match ({what}): altered, or not signed with this "
                    "node's own key")
        return f"signature: does not match ({what}): altered or wrong key"
    return None
