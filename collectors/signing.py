"""HMAC signatures on batches: each cluster has a key; a batch carries the HMAC of its
envelope, so the server can refuse batches from anyone who can merely reach Redis.

The signed bytes are the envelope without its ``signature`` member, serialised as
canonical JSON: keys sorted, no whitespace, UTF-8, Python's shortest round-trip floats.
The server uses this same module to verify.
"""

from __future__ import annotations

import hashlib
import hmac
import json

FIELD = "signature"
ALGORITHM = "hmac-sha256"


def canonical(envelope: dict) -> bytes:
    body = {k: v for k, v in envelope.items() if k != FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass")


def digest(envelope: dict, secret: str) -> str:
    return hmac.new(secret.encode("utf-8"), canonical(envelope), hashlib.sha256).hexdigest()


def sign(envelope: dict, key_id: str, secret: str) -> dict:
    """Add (or replace) the envelope's signature, in place; returns the envelope."""
    envelope.pop(FIELD, None)
    envelope[FIELD] = {"key_id": key_id, "alg": ALGORITHM, "hmac": digest(envelope, secret)}
    return envelope


def verify(envelope: dict, secrets_by_key_id: dict[str, str]) -> str | None:
    """None when the envelope is signed by one of these keys; otherwise the reason."""
    signature = envelope.get(FIELD)
    if signature is None:
        return "signature: missing (this cluster requires signed batches)"
    if not isinstance(signature, dict):
        return "signature: must be an object with key_id, alg and hmac"
    key_id, alg, mac = signature.get("key_id"), signature.get("alg"), signature.get("hmac")
    if alg != ALGORITHM:
        return f"signature: alg must be {ALGORITHM!r}"
    if not isinstance(key_id, str) or key_id not in secrets_by_key_id:
        return f"signature: key id {str(key_id)[:40]!r} is not an active key of this cluster"
    if not isinstance(mac, str):
        return "signature: hmac must be a hex string"
    try:
        expected = digest(envelope, secrets_by_key_id[key_id])
    except (TypeError, ValueError):
        return "signature: the envelope cannot be serialised to verify it"
    if not hmac.compare_digest(expected, mac):
        return f"signature: does not match (key id {key_id!r}): altered or wrong key"
    return None
