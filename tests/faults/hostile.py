"""A hostile corpus for ingest: each case one queue item, built as a collector or an attacker
would put it on the ``ingest`` list, with what the server must do with it.

Messages are written byte for byte here (kombu's Redis message, Celery protocol 2, base64
body), not through Celery's serializer, so that what no well-behaved serializer writes (NaN,
1e400, a lone surrogate escape, a 2^64 integer, invalid UTF-8, 100,000 nested lists) reaches
the real transport and parser. Every batch is signed with its node's key, as a collector
does; the signature covers the canonical form (``collectors/signing.py``), so a token such as
``1e400`` on the wire signs as what it parses to.

A case's ``expect`` is one of:
- ``stored``: the batch lands; ``gpu_rows`` of its GPU rows are stored, at least ``refused``
  items are refused with a reason containing ``reason``;
- ``refused``: the whole batch is refused (ingest health page, ``RejectedBatch``) for
  ``reason``;
- ``dead``: the queue item is not a batch the server can read at all; it is set aside in the
  dead-letter list with ``reason``.
"""

from __future__ import annotations

import base64
import copy
import json
import time
import uuid
from dataclasses import dataclass

from collectors import signing
from tests.factories import node_batch

CLUSTER = "corpus"
OTHER_CLUSTER = "corpus-other"
SECRET = "corpus-cluster-secret-0123456789abcdef"
OTHER_SECRET = "other-cluster-secret-0123456789abcdef"
KEY_ID = "corpus-1"
OTHER_KEY_ID = "other-1"
GPUS = 8
# The consumer under test runs with this message size limit (a smaller one than the default
# 64 MiB, so that the oversized case stays light).
MAX_MESSAGE_BYTES = 8 << 20
# A number that appears nowhere else in a batch: replaced by a raw token on the wire.
MARK = 271828.1828459


@dataclass
class Case:
    name: str
    kind: str  # the class of hostility, for the counts
    raw: bytes
    expect: str  # stored | refused | dead
    node: str = ""
    reason: str = ""
    gpu_rows: int = 0
    refused: int = 0


def sign(envelope: dict, node: str | None = None, *, secret: str = SECRET,
         key_id: str = KEY_ID, cluster: str = CLUSTER) -> dict:
    """Sign as ``node``'s collector does: with its own key, derived from the cluster's."""
    node_key = signing.derive_node_key(secret, cluster, node or envelope["node"])
    return signing.sign(envelope, key_id, node_key)


def message(envelope_text: str | bytes, *, task: str = "clusterui.ingest",
            args_text: str | None = None, body: bytes | None = None) -> bytes:
    """A kombu Redis message as the collector's Celery publishes it (protocol 2)."""
    if body is None:
        if isinstance(envelope_text, bytes):
            envelope_text = envelope_text.decode("utf-8", "surrogateescape")
        args = args_text if args_text is not None else f"[{envelope_text}]"
        text = (f'[{args}, {{}}, {{"callbacks": null, "errbacks": null, "chain": null, '
                f'"chord": null}}]')
        body = text.encode("utf-8", "surrogateescape")
    tag = str(uuid.uuid4())
    return json.dumps({
        "body": base64.b64encode(body).decode("ascii"),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {"lang": "py", "task": task, "id": tag, "shadow": None, "eta": None,
                    "expires": None, "group": None, "group_index": None, "retries": 0,
                    "timelimit": [None, None], "root_id": tag, "parent_id": None,
                    "argsrepr": "(...)", "kwargsrepr": "{}", "origin": "corpus",
                    "ignore_result": True},
        "properties": {"correlation_id": tag, "reply_to": "", "delivery_mode": 2,
                       "delivery_info": {"exchange": "", "routing_key": "ingest"},
                       "priority": 0, "body_encoding": "base64", "delivery_tag": tag},
    }).encode("utf-8")


def batch(node: str, *, samples: int = 2, seq: int = 1, boot: str = "boot-1",
          start: float | None = None, cluster: str = CLUSTER, job: str | None = None) -> dict:
    start = time.time() - 600 if start is None else start
    return node_batch(node=node, seq=seq, boot_id=boot, gpus=GPUS, samples=samples,
                      start=start, cluster=cluster, job=job or f"job-{node}")


def good_message(seq: int, start: float) -> bytes:
    env = sign(batch("good-node", samples=2, seq=seq, boot="good", start=start))
    return message(json.dumps(env))


class Corpus:
    """Builds the cases; ``cases`` in the order they go on the queue."""

    def __init__(self, now: float | None = None):
        self.now = time.time() if now is None else now
        self.cases: list[Case] = []
        self._n = 0

    # --- builders -------------------------------------------------------------------------

    def _node(self) -> str:
        self._n += 1
        return f"h{self._n:03d}"

    def _start(self) -> float:
        return self.now - 900 + self._n  # recent, inside every window

    def add_raw(self, name, kind, raw: bytes, expect, reason="", node=""):
        self.cases.append(Case(name, kind, raw, expect, node=node, reason=reason))

    def add_envelope(self, name, kind, mutate, *, expect="stored", reason="", gpu_rows=None,
                     refused=0, samples=2, token: str | None = None, signed=True,
                     sign_as: str | None = None, wire=None, **batch_kw):
        """A batch of ``samples`` x 8 GPU rows, changed by ``mutate(env)``; ``token`` replaces
        MARK on the wire, and the signature covers what the token parses to (the canonical
        form), as a conforming signer's does."""
        node = self._node()
        env = batch(node, samples=samples, start=self._start(), **batch_kw)
        mutate(env)
        if signed:
            parsed = _parsed(token)
            signable = _replace(env, parsed) if token is not None else env
            sign(signable, sign_as, cluster=env["cluster"] if isinstance(
                env.get("cluster"), str) else CLUSTER)
            env["signature"] = signable["signature"]
        text = json.dumps(env, allow_nan=True)
        if token is not None:
            assert text.count(repr(MARK)) == 1, name
            text = text.replace(repr(MARK), token)
        if wire is not None:
            text = wire(text)
        total = samples * GPUS
        self.cases.append(Case(
            name, kind, message(text), expect, node=node, reason=reason,
            gpu_rows=total - refused if gpu_rows is None else gpu_rows, refused=refused))

    def with_value(self, name, kind, field, value, *, token=None, section="gpu_samples",
                   expect="stored", reason="", samples=2, refused=1):
        """Row 0's ``field`` set to a hostile ``value`` (``token`` on the wire if given)."""

        def mutate(env):
            fields = env[section]["fields"]
            env[section]["rows"][0][fields.index(field)] = MARK if token is not None else value

        self.add_envelope(name, kind, mutate, expect=expect, reason=reason, samples=samples,
                          token=token, refused=refused if section == "gpu_samples" else 0)
        self.cases[-1].refused = refused  # refused items, whichever section they are in


def _parsed(token: str | None):
    """What a JSON token parses to, for signing (non-finite numbers included)."""
    if token is None:
        return None
    try:
        return json.loads(token)
    except RecursionError:
        return None


def _replace(value, by):
    """``value`` with MARK replaced by ``by`` wherever it occurs."""
    if isinstance(value, dict):
        return {k: _replace(v, by) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, by) for v in value]
    return by if value == MARK else value


def build(now: float | None = None) -> list[Case]:  # noqa: C901 - a list of cases
    c = Corpus(now)
    big = 1 << 63

    # --- malformed: not a message, not a call, not an envelope ---------------------------
    c.add_raw("item is not JSON", "malformed", b"\x00garbage{", "dead", "not a Celery message")
    c.add_raw("item is a JSON list", "malformed", b"[1, 2, 3]", "dead", "no headers")
    c.add_raw("item is empty", "malformed", b"", "dead", "not a Celery message")
    c.add_raw("another task", "malformed",
              message(json.dumps(batch("x-task")), task="clusterui.other"), "dead", "task")
    c.add_raw("body not base64", "malformed",
              message("", body=b"x").replace(base64.b64encode(b"x"), b"!!!!"), "dead",
              "base64")
    c.add_raw("body is not JSON", "malformed", message("", body=b"[[{nope"), "dead",
              "not JSON")
    c.add_raw("body cut short", "malformed",
              message("", body=json.dumps([[sign(batch("x-cut"))], {}, {}]).encode()[:-40]),
              "dead", "not JSON")
    c.add_raw("no arguments", "malformed", message("", args_text="[]"), "dead", "one argument")
    c.add_raw("two arguments", "malformed", message("", args_text="[{}, {}]"), "dead",
              "one argument")
    c.add_raw("body is a number", "malformed", message("", body=b"42"), "dead",
              "no argument list")
    c.add_raw("envelope is a list", "malformed", message("[1]"), "refused",
              "envelope must be a JSON object")
    c.add_raw("envelope is null", "malformed", message("null"), "refused",
              "envelope must be a JSON object")
    for name, mutate, reason in [
        ("schema missing", lambda e: e.pop("schema"), "schema"),
        ("schema 2", lambda e: e.__setitem__("schema", 2), "schema"),
        ("schema as text", lambda e: e.__setitem__("schema", "1"), "schema"),
        ("agent missing", lambda e: e.pop("agent"), "agent"),
        ("boot id missing", lambda e: e["agent"].pop("boot_id"), "boot_id"),
        ("seq negative", lambda e: e["agent"].__setitem__("seq", -1), "seq"),
        ("seq as text", lambda e: e["agent"].__setitem__("seq", "7"), "seq"),
        ("seq 2^62", lambda e: e["agent"].__setitem__("seq", 1 << 62), "seq"),
        ("seq 2^64", lambda e: e["agent"].__setitem__("seq", 1 << 64), "seq"),
        ("gpus not a list", lambda e: e.__setitem__("gpus", {"0": 1}), "gpus: must be a list"),
        ("gpu_samples not an object", lambda e: e.__setitem__("gpu_samples", [1]),
         "gpu_samples: must be an object"),
    ]:
        expect = "refused" if name not in ("gpus not a list", "gpu_samples not an object") \
            else "stored"
        c.add_envelope(name, "malformed", mutate, expect=expect, reason=reason, gpu_rows=0,
                       refused=1 if expect == "stored" else 0)

    # --- types: one item of the wrong type, the rest lands ---------------------------------
    for field, value, reason in [
        ("util_pct", "50", "util_pct must be a number"),
        ("util_pct", [50], "util_pct must be a number"),
        ("util_pct", {"v": 50}, "util_pct must be a number"),
        ("util_pct", True, "util_pct must be a number"),
        ("mem_used_mib", 1.5, "mem_used_mib must be an integer"),
        ("throttle_reasons", 0.5, "throttle_reasons must be an integer"),
        ("gpu", "0", "gpu must be an integer index"),
        ("gpu", 99, "gpu refers to no entry"),
        ("job", "no-such-job", "job is not one of this batch's jobs"),
        ("ts", "2026-11-23", "ts must be a finite number"),
    ]:
        for samples in (2, 7):  # 16 rows: the row loop; 56 rows: the column-wise path
            c.with_value(f"{field}={value!r} ({samples * GPUS} rows)", "types", field, value,
                         reason=reason, samples=samples)
    c.add_envelope("row too short", "types",
                   lambda e: e["gpu_samples"]["rows"][0].pop(), reason="values for",
                   refused=1)
    c.add_envelope("row not a list", "types",
                   lambda e: e["gpu_samples"]["rows"].__setitem__(0, {"ts": 1}),
                   reason="row must be a list", refused=1)
    c.add_envelope("fields not names", "types",
                   lambda e: e["gpu_samples"].__setitem__("fields", [1, 2]),
                   reason="fields must be a list of names", gpu_rows=0, refused=16)
    c.with_value("nic rate as text", "types", "rx_bytes_per_s", "1e9", section="nic_samples",
                 reason="rx_bytes_per_s must be a number")
    c.with_value("job cpu as list", "types", "cpu_cores_used", [1], section="job_samples",
                 reason="cpu_cores_used must be a number")

    # --- non-finite numbers: refused as that item -----------------------------------------
    for token, value in (("NaN", float("nan")), ("Infinity", float("inf")),
                         ("-Infinity", float("-inf")), ("1e400", float("inf")),
                         ("-1e400", float("-inf"))):
        for field in ("util_pct", "power_w", "energy_j"):
            c.with_value(f"{field}={token}", "non-finite", field, value, token=token,
                         reason=f"{field}")
        c.with_value(f"nic rx={token}", "non-finite", "rx_bytes_per_s", value, token=token,
                     section="nic_samples", reason="rx_bytes_per_s")
    c.with_value("ts=NaN", "non-finite", "ts", float("nan"), token="NaN", reason="ts")
    c.with_value("ts=1e400 (56 rows)", "non-finite", "ts", float("inf"), token="1e400",
                 samples=7, reason="ts")
    c.with_value("util_pct=NaN (56 rows)", "non-finite", "util_pct", float("nan"),
                 token="NaN", samples=7, reason="util_pct")
    c.add_envelope("interval_s=NaN", "non-finite",
                   lambda e: e.__setitem__("interval_s", MARK), token="NaN",
                   reason="interval_s", refused=0)

    # --- huge and boundary integers: exact in both paths ------------------------------------
    for value, ok in ((big - 1, True), (big, False), (big + 1, False), (big + 1024, False),
                      (1 << 64, False), ((1 << 64) + 1, False), (-1, False), (1 << 100, False),
                      (1 << 53, True), ((1 << 53) + 1, True)):
        for samples in (2, 7):
            c.with_value(f"throttle_reasons={value} ({samples * GPUS} rows)", "integers",
                         "throttle_reasons", value, samples=samples,
                         reason="throttle_reasons out of range", refused=0 if ok else 1)
    for value, ok in (((1 << 24), True), ((1 << 24) + 1, False), (1 << 31, False),
                      ((1 << 53) + 1, False)):
        c.with_value(f"mem_used_mib={value}", "integers", "mem_used_mib", value, samples=7,
                     reason="mem_used_mib out of range", refused=0 if ok else 1)
    for value, ok in (((1 << 56), True), ((1 << 56) + 1, False), (1 << 64, False)):
        c.with_value(f"host_mem={value}", "integers", "host_mem_used_bytes", value,
                     section="job_samples", reason="host_mem_used_bytes out of range",
                     refused=0 if ok else 1)
    for value, ok in (((1 << 31) - 1, True), (1 << 31, False), (1 << 64, False)):
        c.add_envelope(f"spool_dropped={value}", "integers",
                       lambda e, v=value: e["agent"].__setitem__("spool_dropped", v),
                       reason="spool_dropped", refused=0)
        c.cases[-1].refused = 0 if ok else 1
    c.add_envelope("event code 2^31", "integers",
                   lambda e: e["events"].append({"ts": e["sent_at"] - 5, "gpu": 0,
                                                 "kind": "xid", "code": 1 << 31}),
                   reason="events: code")
    c.add_envelope("job cpus 2^64", "integers",
                   lambda e: e["jobs"][0].__setitem__("cpus", 1 << 64), reason="jobs: cpus")
    c.add_envelope("gpu memory_total 2^40", "integers",
                   lambda e: e["gpus"][0].__setitem__("memory_total_mib", 1 << 40),
                   reason="memory_total_mib")

    # --- unicode -------------------------------------------------------------------------
    c.add_envelope("lone surrogate in job user", "unicode",
                   lambda e: e["jobs"][0].__setitem__("user", "ali\ud800ce"),
                   reason="jobs: user")
    c.add_envelope("lone surrogate in job name", "unicode",
                   lambda e: e["jobs"][0].__setitem__("name", "\udfff"), reason="jobs: name")
    c.add_envelope("lone surrogate in GPU model", "unicode",
                   lambda e: e["gpus"][0].__setitem__("model", "H100\ud801"),
                   reason="gpus: model")
    c.add_envelope("lone surrogate in NIC name", "unicode",
                   lambda e: e["nics"][0].__setitem__("name", "mlx\udc00"),
                   reason="nics: name")
    c.add_envelope("lone surrogate in job reference", "unicode",
                   lambda e: e["gpu_samples"]["rows"][0].__setitem__(2, "\ud800"),
                   reason="job", refused=1)
    c.add_envelope("lone surrogate in node name", "unicode",
                   lambda e: e.__setitem__("node", e["node"] + "\ud800"), expect="refused",
                   reason="node", signed=False)
    c.add_envelope("NUL in job name", "unicode",
                   lambda e: e["jobs"][0].__setitem__("name", "a\x00b"), reason="jobs: name")
    c.add_envelope("job name of 10,000 characters", "unicode",
                   lambda e: e["jobs"][0].__setitem__("name", "x" * 10_000),
                   reason="jobs: name")
    c.add_envelope("right-to-left override and emoji (valid)", "unicode",
                   lambda e: e["jobs"][0].__setitem__("name", "train \u202e🚀 ñ"), refused=0)
    # A raw 0xFF byte where the signer had "XY": not JSON text (RFC 8259 requires UTF-8);
    # read as a lone surrogate, it no longer matches what was signed.
    c.add_envelope("invalid UTF-8 byte in job name", "unicode",
                   lambda e: e["jobs"][0].__setitem__("name", "abcXYZ"),
                   wire=lambda t: t.replace("abcXYZ", "abc\udcffZ"),
                   expect="refused", reason="signature")

    # --- time ----------------------------------------------------------------------------
    now = c.now
    c.with_value("sample in 2000", "time", "ts", 946684800.0 + 3600, reason="ts")
    c.with_value("sample five years old", "time", "ts", now - 5 * 365 * 86400, reason="ts")
    c.with_value("sample a day in the future", "time", "ts", now + 86400, reason="future")
    c.with_value("sample 3 days behind the newest", "time", "ts", now - 3 * 86400,
                 reason="ts")
    c.with_value("negative ts", "time", "ts", -1.0, reason="ts")
    c.with_value("nic sample five years old", "time", "ts", now - 5 * 365 * 86400,
                 section="nic_samples", reason="ts")
    c.add_envelope("event five years old", "time",
                   lambda e: e["events"].append({"ts": now - 5 * 365 * 86400, "gpu": 0,
                                                 "kind": "xid", "code": 79}),
                   reason="events")
    c.add_envelope("sent_at 1e300", "time", lambda e: e.__setitem__("sent_at", 1e300),
                   reason="", refused=0)
    c.cases[-1].expect = "stored"
    c.add_envelope("job started_at 1e300", "time",
                   lambda e: e["jobs"][0].__setitem__("started_at", 1e300),
                   reason="jobs: started_at")
    c.add_envelope("all samples in 2001", "time",
                   lambda e: [r.__setitem__(0, 978307200.0 + i)
                              for i, r in enumerate(e["gpu_samples"]["rows"])],
                   reason="ts", gpu_rows=0, refused=16)

    # --- duplicates ----------------------------------------------------------------------
    c.add_envelope("same (gpu, ts) twice in a batch", "duplicates",
                   lambda e: e["gpu_samples"]["rows"].append(
                       copy.copy(e["gpu_samples"]["rows"][0])),
                   reason="duplicate", gpu_rows=16, refused=1)
    c.add_envelope("duplicate GPU uuid", "duplicates",
                   lambda e: e["gpus"].append(dict(e["gpus"][0], index=9)),
                   reason="duplicate uuid")
    c.add_envelope("duplicate job id", "duplicates",
                   lambda e: e["jobs"].append(dict(e["jobs"][0])), reason="duplicate id")
    c.add_envelope("duplicate NIC name", "duplicates",
                   lambda e: e["nics"].append(dict(e["nics"][0])), reason="duplicate name")
    # The same samples again: the same key (a redelivery), another seq, another boot id.
    node = c._node()
    start = c._start()
    original = sign(batch(node, samples=2, start=start))
    c.cases.append(Case("original of the replays", "duplicates",
                        message(json.dumps(original)), "stored", node=node, gpu_rows=16))
    c.cases.append(Case("redelivered batch (same key)", "duplicates",
                        message(json.dumps(original)), "stored", node=node, gpu_rows=16))
    for what, changes in (("another seq", {"seq": 2}), ("another boot id",
                                                       {"boot": "boot-2"}),
                          ("another boot id and seq", {"boot": "boot-3", "seq": 9})):
        env = sign(batch(node, samples=2, start=start, **changes))
        c.cases.append(Case(f"same samples, {what}", "duplicates", message(json.dumps(env)),
                            "stored", node=node, gpu_rows=16, reason="duplicate"))

    # --- identity: a node writes only as itself ------------------------------------------
    c.add_envelope("signed by another node's key", "identity", lambda e: None,
                   sign_as="good-node", expect="refused", reason="signature")
    c.add_envelope("unsigned", "identity", lambda e: None, signed=False, expect="refused",
                   reason="signature")
    c.add_envelope("value changed after signing", "identity", lambda e: None,
                   wire=lambda t: t.replace('"cpus": 32', '"cpus": 33'),
                   expect="refused", reason="signature")
    c.add_envelope("unknown key id", "identity", lambda e: None, expect="refused",
                   reason="signature")
    c.cases[-1].raw = message(json.dumps(sign(
        batch(c.cases[-1].node, start=c._start()), key_id="nope")))
    c.add_envelope("signed with the whole cluster's secret", "identity", lambda e: None,
                   expect="refused", reason="signature", signed=False)
    env = batch(c.cases[-1].node, start=c._start())
    c.cases[-1].raw = message(json.dumps(signing.sign(env, KEY_ID, SECRET)))
    c.add_envelope("another cluster's GPU", "identity",
                   lambda e: e["gpus"][0].__setitem__("uuid", "GPU-other-cluster-0"),
                   reason="belongs to cluster", gpu_rows=14, refused=2)
    c.add_envelope("another cluster's name with this cluster's key", "identity",
                   lambda e: e.__setitem__("cluster", OTHER_CLUSTER), signed=False,
                   expect="refused", reason="signature")
    env = batch(c.cases[-1].node, start=c._start(), cluster=OTHER_CLUSTER)
    c.cases[-1].raw = message(json.dumps(sign(env, cluster=CLUSTER)))
    c.add_envelope("bob's job re-reported as alice's", "identity",
                   lambda e: e["jobs"][0].update({"id": "bobs-job", "user": "alice"})
                   or [r.__setitem__(2, "bobs-job") for r in e["gpu_samples"]["rows"]],
                   refused=0)

    # --- size and nesting ------------------------------------------------------------------
    c.add_envelope("util_pct nested 500 deep", "nesting",
                   lambda e: e["gpu_samples"]["rows"][0].__setitem__(
                       3, json.loads("[" * 500 + "]" * 500)),
                   reason="util_pct must be a number", refused=1)
    c.add_envelope("an unknown member nested 100,000 deep", "nesting",
                   lambda e: e.__setitem__("extra", MARK), signed=False, token=(
                       "[" * 100_000 + "]" * 100_000), expect="dead", reason="nested")
    c.add_envelope("200,001 sample rows", "size",
                   lambda e: e["nic_samples"].__setitem__(
                       "rows", [[e["sent_at"] - 1 - i * 1e-3, 0] for i in range(200_001)]),
                   expect="refused", reason="INGEST_MAX_ROWS", gpu_rows=0)
    c.add_raw("message over INGEST_MAX_MESSAGE_BYTES", "size",
              message(json.dumps(dict(batch("x-huge"), padding="x" * (MAX_MESSAGE_BYTES + 1)))),
              "dead", "INGEST_MAX_MESSAGE_BYTES")
    return c.cases
