"""Validation of contract 1 (the ingest batch), without touching the database.

``validate_batch`` turns an envelope into a ``Batch`` of clean rows. A fault in the
envelope itself (not a JSON object, an unknown schema, no node, too many rows) refuses the
batch whole with ``BatchRejected``. A fault in one sample, inventory entry or event
refuses that item only: it is counted under a reason, one example of each reason is kept,
and everything else in the batch goes on to be stored.
"""

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from itertools import chain, repeat
from operator import ge, is_not, itemgetter, le

import orjson
from django.conf import settings

from clusterui.fabric.metrics import FABRIC_METRICS
from clusterui.fabric.store import split_rows
from clusterui.gpuhealth.validate import validate_health
from clusterui.ingest.typed_decode import MAX_FIELDS, TypedRows
from clusterui.inventory.choices import NicKind
from clusterui.jobs.choices import ExitState, Scheduler
from clusterui.telemetry.metrics import GPU_METRICS, JOB_METRICS, NIC_METRICS, Metric

SCHEMA_VERSION = 1
MIN_TS = 946684800.0  # 2000-01-01: earlier is a broken clock, not history
INT4_MAX = (1 << 31) - 1
MAX_GPUS = 1024
MAX_NICS = 1024
MAX_JOBS = 4096
MAX_EVENTS = 10_000


class BatchRejected(Exception):
    """The whole batch is refused; ``reason`` says why in words a collector author can act on."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Batch:
    cluster: str
    node: str
    boot_id: str
    seq: int
    sent_at: float | None
    agent_version: str
    interval_s: float | None
    simulated: bool
    spool_dropped: int
    gpus: dict[int, dict] = field(default_factory=dict)  # batch index -> inventory entry
    nics: dict[int, dict] = field(default_factory=dict)
    jobs: dict[str, dict] = field(default_factory=dict)  # job id -> entry
    # Rows in the order of the metrics module's columns, with batch-local references:
    # (ts, gpu_index, job_id | None, *GPU metrics)
    gpu_rows: list[tuple] = field(default_factory=list)
    nic_rows: list[tuple] = field(default_factory=list)  # (ts, nic_index, *NIC metrics)
    # (ts, nic_index, *fabric metrics): rows with any fabric field (``clusterui.fabric``)
    fabric_rows: list[tuple] = field(default_factory=list)
    job_rows: list[tuple] = field(default_factory=list)  # (ts, job_id, *JOB metrics)
    events: list[dict] = field(default_factory=list)
    gpu_health: list[tuple] = field(default_factory=list)  # (ts, gpu_index, *health FIELDS)
    key_id: str = ""  # set by the signature check, stored for key-rotation progress
    # Set with key_id: 0 unsigned, else the signature version (docs/protocol.md), stored so
    # operators see when every collector has moved off version 1.
    signature_version: int = 0
    rejected: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    # What the writer computes of the batch alone (``prepare.Prepared``), once made.
    prepared: object = field(default=None, repr=False, compare=False)

    def reject(self, reason: str, example: str) -> None:
        self.rejected[reason] += 1
        if reason not in self.examples:
            self.examples[reason] = str(example)[:200]

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())


# --- small checkers: each returns (value, None) or (None, reason) --------------------

def _show(value, limit: int = 40) -> str:
    """A short, safe rendering of a hostile value for an example (no deep repr)."""
    if isinstance(value, list | dict | tuple):
        return f"<{type(value).__name__} of {len(value)}>"
    if isinstance(value, str):
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return repr(value)[:limit]


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def text(value, limit: int, *, required: bool = False) -> tuple[str | None, str | None]:
    if value is None:
        return (None, "missing") if required else ("", None)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None, f"must be a string, got {type(value).__name__}"
    if required and not value.strip():
        return None, "must not be empty"
    if len(value) > limit:
        return None, f"longer than {limit} characters"
    if "\x00" in value:
        return None, "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None, "is not valid UTF-8"
    return value, None


def _optional_number(value, lo: float, hi: float, *, integer: bool = False):
    if value is None:
        return None, None
    if not _is_number(value):
        return None, f"must be a number or null, got {type(value).__name__}"
    if isinstance(value, float) and not math.isfinite(value):
        return None, "must be finite (NaN and infinity are not measurements)"
    if integer and isinstance(value, float) and not value.is_integer():
        return None, "must be an integer"
    # Python compares an int with a float exactly: 2**63 is out of [0, 2**63 - 1].
    if not lo <= value <= hi:
        return None, f"out of range [{lo:g}, {hi:g}]"
    return (int(value) if integer else float(value)), None


def _timestamp(value, window: "_Window"):
    if not _is_number(value) or (isinstance(value, float) and not math.isfinite(value)):
        return None, "ts must be a finite number of Unix seconds"
    if value < window.oldest:
        return None, (f"ts is older than raw retention (RAW_RETENTION_DAYS="
                      f"{window.retention_days:g})")
    if value > window.newest:
        return None, f"ts is more than {window.max_future_s:g} s in the future"
    return float(value), None


def _index(value, known) -> tuple[int | None, str | None]:
    if not isinstance(value, int) or isinstance(value, bool):
        return None, f"must be an integer index, got {type(value).__name__}"
    if value not in known:
        return None, "refers to no entry of this batch's inventory"
    return value, None


# --- the envelope ------------------------------------------------------------------------

def validate_batch(envelope, *, now: float | None = None, max_rows: int = 200_000,
                   max_future_s: float = 300.0, retention_days: float | None = None,
                   max_span_s: float | None = None) -> Batch:
    """``retention_days`` and ``max_span_s`` default to ``RAW_RETENTION_DAYS`` and
    ``INGEST_MAX_SPAN_S``: samples older than the raw retention, or further behind the
    batch's newest sample than the span, are refused one by one."""
    now = time.time() if now is None else now
    if retention_days is None:
        retention_days = settings.RAW_RETENTION_DAYS
    if max_span_s is None:
        max_span_s = settings.INGEST_MAX_SPAN_S
    if not isinstance(envelope, dict):
        raise BatchRejected(f"envelope must be a JSON object, got {type(envelope).__name__}")
    schema = envelope.get("schema")
    if schema is None:
        raise BatchRejected("schema: missing (this server speaks schema 1)")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise BatchRejected(f"schema: must be an integer, got {_show(schema, 40)}")
    if schema != SCHEMA_VERSION:
        raise BatchRejected(
            f"schema: version {schema} is not supported (this server speaks {SCHEMA_VERSION})"
        )
    cluster, err = text(envelope.get("cluster"), 64, required=True)
    if err:
        raise BatchRejected(f"cluster: {err}")
    node, err = text(envelope.get("node"), 128, required=True)
    if err:
        raise BatchRejected(f"node: {err}")
    agent = envelope.get("agent")
    if not isinstance(agent, dict):
        raise BatchRejected("agent: must be an object with boot_id and seq")
    boot_id, err = text(agent.get("boot_id"), 64, required=True)
    if err:
        raise BatchRejected(f"agent.boot_id: {err}")
    seq = agent.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < 1 << 62:
        raise BatchRejected(f"agent.seq: must be a non-negative integer, got {_show(seq, 40)}")
    version, err = text(agent.get("version"), 32)
    # Stored in an int4 column.
    spool_dropped, err2 = _optional_number(agent.get("spool_dropped"), 0, INT4_MAX,
                                           integer=True)
    # When the collector sent it: shown as ingest delay and used as the node's last data
    # time when a batch has no samples, so it must be a plausible time.
    sent_at, err4 = _optional_number(envelope.get("sent_at"), MIN_TS, now + max_future_s)
    interval, err3 = _optional_number(envelope.get("interval_s"), 0.01, 86400)

    sections = {name: envelope.get(name) for name in ("gpu_samples", "nic_samples", "job_samples")}
    total_rows = 0
    for section in sections.values():
        if isinstance(section, dict) and isinstance(section.get("rows"), list):
            total_rows += len(section["rows"])
    if total_rows > max_rows:
        raise BatchRejected(
            f"batch has {total_rows} sample rows; the limit is {max_rows} (INGEST_MAX_ROWS): "
            "flush more often"
        )

    batch = Batch(
        cluster=cluster, node=node, boot_id=boot_id, seq=seq, sent_at=None,
        agent_version="" if err else (version or ""),
        interval_s=None if err3 else interval,
        simulated=agent.get("simulated") is True,
        spool_dropped=0 if err2 else (spool_dropped or 0),
    )
    if err:
        batch.reject(f"agent.version: {err}", _show(agent.get("version"), 80))
    if err2:
        batch.reject(f"agent.spool_dropped: {err2}", _show(agent.get("spool_dropped"), 80))
    if err3:
        batch.reject(f"interval_s: {err3}", _show(envelope.get("interval_s"), 80))
    if err4:
        batch.reject(f"sent_at: {err4} (a clock off?)", _show(envelope.get("sent_at"), 80))
    batch.sent_at = sent_at

    window = _Window(now, max_future_s, max(MIN_TS, now - retention_days * 86400.0),
                     retention_days)
    _inventory(batch, envelope.get("gpus"), envelope.get("nics"), envelope.get("jobs"))
    _job_times_not_ahead(batch, window)
    _samples(batch, "gpu_samples", sections["gpu_samples"], "gpu", batch.gpus, GPU_METRICS,
             batch.gpu_rows, window, with_job=True)
    _samples(batch, "nic_samples", sections["nic_samples"], "nic", batch.nics,
             NIC_METRICS + FABRIC_METRICS, batch.nic_rows, window)
    _samples(batch, "job_samples", sections["job_samples"], "job", batch.jobs, JOB_METRICS,
             batch.job_rows, window)
    _events(batch, envelope.get("events"), window)
    batch.gpu_health = validate_health(batch, envelope.get("gpu_health"), window)
    _within_span(batch, max_span_s)
    batch.nic_rows, batch.fabric_rows = split_rows(batch.nic_rows, len(NIC_METRICS))
    return batch


@dataclass(frozen=True)
class _Window:
    """The times a sample may have: not older than the raw retention, not in the future."""

    now: float
    max_future_s: float
    oldest: float
    retention_days: float

    @property
    def newest(self) -> float:
        return self.now + self.max_future_s


# A clean row's time, for loops in C (a generator per row cost 5 % of ingest; the writer too).
row_time = itemgetter(0)


def _within_span(batch: Batch, max_span_s: float) -> None:
    """Refuse, one by one, the samples and events further behind the batch's newest sample
    than ``max_span_s``: one batch never reaches back over more than that (a node whose
    clock jumped, a corrupt spool), so it never creates more than a few day partitions."""
    sections = (("gpu_samples", batch.gpu_rows), ("nic_samples", batch.nic_rows),
                ("job_samples", batch.job_rows))
    newest = max((max(map(row_time, rows)) for _n, rows in sections if rows), default=None)
    if batch.events:
        last_event = max(e["ts"] for e in batch.events)
        newest = last_event if newest is None else max(newest, last_event)
    if newest is None:
        return
    cutoff = newest - max_span_s
    reason = (f"ts is more than {max_span_s:g} s behind the batch's newest sample "
              "(INGEST_MAX_SPAN_S)")
    for name, rows in sections:
        if rows and min(map(row_time, rows)) < cutoff:
            kept = [r for r in rows if r[0] >= cutoff]
            for r in rows:
                if r[0] < cutoff:
                    batch.reject(f"{name}: {reason}", f"ts {r[0]!r}")
            rows[:] = kept
    if batch.events and min(e["ts"] for e in batch.events) < cutoff:
        for e in batch.events:
            if e["ts"] < cutoff:
                batch.reject(f"events: {reason}", f"ts {e['ts']!r}")
        batch.events[:] = [e for e in batch.events if e["ts"] >= cutoff]


# A node sends the same inventory in every batch: its validated form is remembered, keyed
# by the inventory's exact content, so that only the samples are checked each time.
_INVENTORY_MEMO: dict[bytes, tuple[dict, dict, dict, list[tuple[str, str]]]] = {}
_INVENTORY_MEMO_MAX = 20_000


def _inventory(batch: Batch, gpus, nics, jobs) -> None:
    try:
        key = orjson.dumps([gpus, nics, jobs])
    except (TypeError, orjson.JSONEncodeError):  # not plain JSON (a huge integer): no memo
        key = None
    hit = _INVENTORY_MEMO.get(key) if key is not None else None
    if hit is None:
        scratch = Batch(cluster="", node="", boot_id="", seq=0, sent_at=None,
                        agent_version="", interval_s=None, simulated=False, spool_dropped=0)
        _gpus(scratch, gpus)
        _nics(scratch, nics)
        _jobs(scratch, jobs)
        rejections = [(reason, scratch.examples[reason]) for reason in scratch.rejected
                      for _ in range(scratch.rejected[reason])]
        hit = (scratch.gpus, scratch.nics, scratch.jobs, rejections)
        # Only a clean inventory is remembered: orjson writes NaN as null, so a faulty one
        # could share its key with a good one.
        if key is not None and not rejections:
            if len(_INVENTORY_MEMO) >= _INVENTORY_MEMO_MAX:
                _INVENTORY_MEMO.clear()
            _INVENTORY_MEMO[key] = hit
    # Entries are shared between batches and never changed after validation.
    batch.gpus, batch.nics, batch.jobs = dict(hit[0]), dict(hit[1]), dict(hit[2])
    for reason, example in hit[3]:
        batch.reject(reason, example)


def _entries(batch: Batch, name: str, value, limit: int) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        batch.reject(f"{name}: must be a list", type(value).__name__)
        return []
    if len(value) > limit:
        batch.reject(f"{name}: more than {limit} entries; the rest were ignored", str(len(value)))
        return value[:limit]
    return value


def _gpus(batch: Batch, value) -> None:
    seen_uuids = set()
    for position, entry in enumerate(_entries(batch, "gpus", value, MAX_GPUS)):
        where = f"gpus[{position}]"
        if not isinstance(entry, dict):
            batch.reject("gpus: entry must be an object", where)
            continue
        uuid, err = text(entry.get("uuid"), 96, required=True)
        if err:
            batch.reject(f"gpus: uuid {err}", where)
            continue
        if uuid in seen_uuids:
            batch.reject("gpus: duplicate uuid", f"{where}: {uuid}")
            continue
        index, err = _optional_number(entry.get("index", position), 0, 1023, integer=True)
        if err or index is None:
            batch.reject(f"gpus: index {err or 'missing'}", where)
            continue
        clean = {"uuid": uuid, "index": index}
        problems = []
        for key, lo, hi, integer in (
            ("memory_total_mib", 0, 1 << 24, True),
            ("power_limit_w", 0, 10_000, False),
            ("nvlink_bytes_per_s", 0, 1e13, False),
        ):
            clean[key], err = _optional_number(entry.get(key), lo, hi, integer=integer)
            if err:
                problems.append(f"{key} {err}")
        for key, limit in (("model", 96), ("pci_bus_id", 32)):
            clean[key], err = text(entry.get(key), limit)
            if err:
                problems.append(f"{key} {err}")
                clean[key] = ""
        # The collector sends MIG mode as ``mig_enabled`` (nvmlDeviceGetMigMode's current
        # mode); it is stored as the GPU's ``mig_mode``.
        mig = entry.get("mig_enabled")
        clean["mig_mode"] = mig if isinstance(mig, bool) else None
        if mig is not None and not isinstance(mig, bool):
            problems.append("mig_enabled must be true, false or null, got "
                            f"{type(mig).__name__}")
        _mig_instance(entry, clean, problems)
        for problem in problems:  # the GPU is kept; only the bad attribute is dropped
            batch.reject(f"gpus: {problem}", where)
        # Samples and jobs refer to a GPU by its position in this batch's list.
        seen_uuids.add(uuid)
        batch.gpus[position] = clean


def _mig_instance(entry: dict, clean: dict, problems: list[str]) -> None:
    """A MIG instance's optional attributes (``docs/protocol.md``): its parent GPU's uuid,
    profile, GPU / compute instance ids, and its slices out of the GPU's, which make its
    ``mig_share`` (what job efficiency counts it as). A bad one is dropped on its own."""
    clean["parent_uuid"], err = text(entry.get("parent_uuid"), 96)
    if err:
        problems.append(f"parent_uuid {err}")
        clean["parent_uuid"] = None
    clean["parent_uuid"] = clean["parent_uuid"] or None
    if clean["parent_uuid"] == clean["uuid"]:
        problems.append("parent_uuid must name another GPU")
        clean["parent_uuid"] = None
    clean["mig_profile"], err = text(entry.get("mig_profile"), 32)
    if err:
        problems.append(f"mig_profile {err}")
    clean["mig_profile"] = clean["mig_profile"] or ""
    ints = {}
    for key, lo, hi in (("mig_gi_id", 0, 1023), ("mig_ci_id", 0, 1023),
                        ("mig_slices", 1, 64), ("mig_slices_total", 1, 64)):
        ints[key], err = _optional_number(entry.get(key), lo, hi, integer=True)
        if err:
            problems.append(f"{key} {err}")
    clean["mig_gi_id"], clean["mig_ci_id"] = ints["mig_gi_id"], ints["mig_ci_id"]
    slices, total = ints["mig_slices"], ints["mig_slices_total"]
    clean["mig_share"] = None
    if slices is not None and total is not None:
        if slices > total:
            problems.append(f"mig_slices {slices} is more than mig_slices_total {total}")
        elif clean["parent_uuid"]:
            clean["mig_share"] = slices / total


def _nics(batch: Batch, value) -> None:
    seen = set()
    for position, entry in enumerate(_entries(batch, "nics", value, MAX_NICS)):
        where = f"nics[{position}]"
        if not isinstance(entry, dict):
            batch.reject("nics: entry must be an object", where)
            continue
        name, err = text(entry.get("name"), 64, required=True)
        if err:
            batch.reject(f"nics: name {err}", where)
            continue
        if name in seen:
            batch.reject("nics: duplicate name", f"{where}: {name}")
            continue
        kind = entry.get("kind")
        if kind not in NicKind.values:
            batch.reject(f"nics: kind must be one of {', '.join(NicKind.values)}", f"{where}: {_show(kind, 40)}")
            continue
        link, err = _optional_number(entry.get("link_bytes_per_s"), 0, 1e13)
        if err:
            batch.reject(f"nics: link_bytes_per_s {err}", where)
        seen.add(name)
        batch.nics[position] = {"name": name, "kind": kind, "link_bytes_per_s": link}


def _jobs(batch: Batch, value) -> None:
    for position, entry in enumerate(_entries(batch, "jobs", value, MAX_JOBS)):
        where = f"jobs[{position}]"
        if not isinstance(entry, dict):
            batch.reject("jobs: entry must be an object", where)
            continue
        job_id, err = text(entry.get("id"), 128, required=True)
        if err:
            batch.reject(f"jobs: id {err}", where)
            continue
        scheduler = entry.get("scheduler", "none")
        if scheduler not in Scheduler.values:
            batch.reject(f"jobs: scheduler must be one of {', '.join(Scheduler.values)}",
                         f"{where}: {_show(scheduler, 40)}")
            continue
        if job_id in batch.jobs:
            batch.reject("jobs: duplicate id", f"{where}: {job_id}")
            continue
        clean = {"id": job_id, "scheduler": scheduler}
        for key, limit in (("user", 64), ("name", 256), ("account", 64), ("partition", 64)):
            clean[key], err = text(entry.get(key), limit)
            if err:
                batch.reject(f"jobs: {key} {err}", where)
                clean[key] = ""
        # Kubernetes (docs/protocol.md); the limits are Kubernetes' own: a namespace is a
        # DNS label (63), a pod or object name a DNS subdomain (253), a kind a Go type name.
        for key, limit in (("namespace", 63), ("pod", 253), ("owner_kind", 63),
                           ("owner_name", 253)):  # fmt: skip
            clean[key], err = text(entry.get(key), limit)
            if err:
                batch.reject(f"jobs: {key} {err}", f"{where}: {_show(entry.get(key), 40)}")
                clean[key] = ""
        for key in ("started_at", "ended_at"):
            clean[key], err = _optional_number(entry.get(key), MIN_TS, 1e11)
            if err:
                batch.reject(f"jobs: {key} {err}", where)
        clean["cpus"], err = _optional_number(entry.get("cpus"), 0, 1 << 24, integer=True)
        if err:
            batch.reject(f"jobs: cpus {err}", where)
        _scheduler_facts(batch, entry, clean, where)
        gpus = entry.get("gpus") or []
        clean["gpus"] = []
        if not isinstance(gpus, list):
            batch.reject("jobs: gpus must be a list of GPU indexes", where)
            gpus = []
        for g in gpus:
            index, err = _index(g, batch.gpus)
            if err:
                batch.reject(f"jobs: gpus entry {err}", f"{where}: {_show(g, 40)}")
            else:
                clean["gpus"].append(index)
        batch.jobs[job_id] = clean


_JOB_TIMES = ("submitted_at", "started_at", "ended_at")
_EXIT_FACTS = (("exit_state", ""), ("exit_code", None), ("exit_signal", None))


def _job_times_not_ahead(batch: Batch, window: "_Window") -> None:
    """A job's times after the batch's "now" (beyond the clock skew samples are allowed,
    ``max_future_s``) are refused one by one, the job and its other facts kept: an end in
    the future is no end the node can have seen, and stored it would hold a running job
    ended until that date (a job reported running revives only with data newer than its
    end). Checked here, not in ``_jobs``: inventories are remembered across batches, and
    this bound moves with the clock."""
    newest = window.newest
    for job_id, job in batch.jobs.items():
        ahead = [key for key in _JOB_TIMES if job.get(key) is not None and job[key] > newest]
        if not ahead:
            continue
        job = batch.jobs[job_id] = dict(job)  # entries are shared between batches: a copy
        for key in ahead:
            batch.reject(f"jobs: {key} is in the future (a clock off?)",
                         f"{job_id}: {job[key]:.0f}")
            job[key] = None
        if "ended_at" in ahead:  # no end, so no way it ended
            job.update(_EXIT_FACTS)


# The scheduler facts of a job (docs/protocol.md): each optional, each refused on its own.
_FACTS = (("submitted_at", MIN_TS, 1e11), ("time_limit_s", 1, INT4_MAX),
          ("exit_code", 0, 255), ("exit_signal", 0, 127))  # fmt: skip


def _scheduler_facts(batch: Batch, entry: dict, clean: dict, where: str) -> None:
    for key, lo, hi in _FACTS:
        clean[key], err = _optional_number(entry.get(key), lo, hi, integer=key != "submitted_at")
        if err:
            batch.reject(f"jobs: {key} {err}", f"{where}: {_show(entry.get(key), 40)}")
    state = entry.get("exit_state")
    clean["exit_state"] = ""
    if state is not None and state not in ExitState.values:
        batch.reject(f"jobs: exit_state must be null or one of {', '.join(ExitState.values)}",
                     f"{where}: {_show(state, 40)}")
    elif state is not None:
        clean["exit_state"] = state
    if clean.get("ended_at") is None:  # a job that has not ended has not exited
        for key in ("exit_state", "exit_code", "exit_signal"):
            if clean[key] not in (None, ""):
                batch.reject(f"jobs: {key} given for a job without ended_at", where)
                clean[key] = "" if key == "exit_state" else None


_NONE = type(None)
_NUMBER = {float, int}
_INTS = frozenset({int, _NONE})
_REALS = frozenset({float, int, _NONE})
FAST_PATH = True  # tests turn it off to compare the two paths
_not_none = partial(is_not, None)


@dataclass(frozen=True)
class _Layout:
    """What a section's ``fields`` mean for its rows (computed once per distinct list of
    fields: a collector sends the same one in every batch)."""

    width: int
    ts_at: int
    ref_at: int
    job_at: int | None
    plan: tuple[tuple[Metric, int | None], ...]  # every metric, and its column or None
    # The metrics present, for the whole-section check: their columns, bounds, and which of
    # them are real-valued (NaN and infinity are looked for there) or integers.
    columns: tuple[int, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]
    reals: tuple[int, ...]  # positions in ``columns``
    integers: tuple[int, ...]
    # The fields are exactly a clean row's order (time, reference, job, every metric in
    # order, nothing else): a clean row is the row as sent.
    canonical: bool


_LAYOUTS: dict[tuple, "_Layout | str"] = {}


def _layout(name: str, fields, ref_field: str, metrics: tuple[Metric, ...],
            with_job: bool) -> "_Layout | str":
    """The section's layout, or the reason its ``fields`` are unusable (each row is then
    refused with it)."""
    try:
        # Remembered only for a list of a plausible length: a hostile one of a million
        # fields is judged each time, not kept.
        key = (name, *fields) if type(fields) is list and len(fields) <= MAX_FIELDS else None
        hit = _LAYOUTS.get(key) if key is not None else None
    except TypeError:  # a field that is not hashable (a list): not a list of names
        key = hit = None
    if hit is not None:
        return hit
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        return f"{name}: fields must be a list of names"
    missing = [f for f in ("ts", ref_field) if f not in fields]
    duplicated = ({f for f in fields if fields.count(f) > 1}
                  if len(set(fields)) != len(fields) else set())
    if missing:
        found: _Layout | str = f"{name}: fields lack {', '.join(missing)}"
    elif duplicated:
        found = f"{name}: fields repeat {', '.join(sorted(duplicated))}"
    else:
        position = {f: i for i, f in enumerate(fields)}
        # Unknown fields are ignored; absent known ones are stored as null.
        plan = tuple((m, position.get(m.name)) for m in metrics)
        present = [(m, at) for m, at in plan if at is not None]
        found = _Layout(
            width=len(fields), ts_at=position["ts"], ref_at=position[ref_field],
            job_at=position.get("job") if with_job else None, plan=plan,
            columns=tuple(at for _m, at in present),
            lo=tuple(m.lo for m, _at in present), hi=tuple(m.hi for m, _at in present),
            reals=tuple(i for i, (m, _at) in enumerate(present) if not m.integer),
            integers=tuple(i for i, (m, _at) in enumerate(present) if m.integer),
            canonical=[position["ts"], position[ref_field],
                       *([position.get("job")] if with_job else []),
                       *(at for _m, at in plan)] == list(range(len(fields))))
    if key is not None:
        if len(_LAYOUTS) >= 1000:
            _LAYOUTS.clear()
        _LAYOUTS[key] = found
    return found


def _clean_rows(rows, layout: _Layout, ref_is_job, known, jobs,
                window: "_Window") -> list[tuple] | None:
    """The rows of a section in which nothing is wrong, checked a whole section at a time:
    a fixed number of builtins that loop in C (``map(type, ...)``, ``min``, ``max``,
    ``sum`` mapped over all the metric columns at once), so no Python work per value or
    per column, and no fixed cost per column that outweighs a small section (numpy's did:
    a node-sized batch has 8 rows). None as soon as anything is unusual, and the row-by-row
    check below then finds exactly what and where. Same rows as that check for every row
    it accepts (an integer in a real column may stay an int). Rows the typed decoder passed
    (``typed_decode.TypedRows``) skip the checks of types and bounds it made; the time
    window, the references and duplicates are checked all the same."""
    if not FAST_PATH:
        return None
    typed = type(rows) is TypedRows
    if not typed and (set(map(type, rows)) != {list}
                      or set(map(len, rows)) != {layout.width}):
        return None
    if not rows:
        return []
    cols = list(zip(*rows, strict=True))
    ts = cols[layout.ts_at]
    types = {float} if typed else set(map(type, ts))
    if not types <= _NUMBER or not _finite_within(ts, window.oldest, window.newest):
        return None
    if int in types:
        ts = tuple(map(float, ts))
    refs = cols[layout.ref_at]
    if not typed and set(map(type, refs)) != ({str} if ref_is_job else {int}):
        return None
    if not set(refs) <= known.keys():
        return None
    if len(set(zip(refs, ts, strict=True))) != len(rows):
        return None
    out_cols = [ts, refs]
    if jobs is not None:
        if layout.job_at is None:
            out_cols.append(repeat(None, len(rows)))
        else:
            job_col = cols[layout.job_at]
            if not typed and not set(map(type, job_col)) <= {str, _NONE}:
                return None
            if not set(job_col) - {None} <= jobs.keys():
                return None
            out_cols.append(job_col)
    if typed:
        if layout.canonical:
            return list(rows)
    elif layout.columns:
        metric_cols = [cols[at] for at in layout.columns]
        reals = [metric_cols[i] for i in layout.reals]
        # Only numbers (and null) in the real columns, only ints (and null) in the integer
        # ones: one set of types for each kind, over all its columns at once.
        real_types = set(map(type, chain.from_iterable(reals)))
        if not real_types <= _REALS:
            return None
        if len(reals) != len(metric_cols):
            int_types = set(map(type, chain.from_iterable(
                metric_cols[i] for i in layout.integers)))
            if not int_types <= _INTS:
                return None
            real_types |= int_types
        lo, hi = layout.lo, layout.hi
        if _NONE in real_types:  # nulls aside; a column of nulls only has nothing to check
            present = [(c, lo[i], hi[i]) for i, c in enumerate(
                tuple(filter(_not_none, c)) for c in metric_cols) if c]
            reals = [c for i, c in enumerate(metric_cols) if i in layout.reals]
            reals = [tuple(filter(_not_none, c)) for c in reals]
            metric_cols, lo, hi = ([list(x) for x in zip(*present, strict=True)]
                                   if present else ([], [], []))
        # A NaN or an infinity makes the sum of the real values non-finite; min and max
        # compare exactly (an int with its bounds too: 2**63 is out of [0, 2**63 - 1]).
        try:
            if not math.isfinite(sum(chain.from_iterable(reals))):
                return None
        except OverflowError:  # values near the float limit: judged row by row
            return None
        if not (all(map(ge, map(min, metric_cols), lo))
                and all(map(le, map(max, metric_cols), hi))):
            return None
    # An absent metric: an endless column of nulls (zip stops at the real columns' end).
    out_cols += [repeat(None) if at is None else cols[at] for _m, at in layout.plan]
    # An int in a real column stays an int (same value; the writer's binary COPY takes it).
    return list(zip(*out_cols, strict=False))


def _finite_within(values, lo: float, hi: float) -> bool:
    """Every value (int or float) finite and in [lo, hi]. One ``sum`` finds a NaN or an
    infinity (it propagates); ``min``/``max`` then compare exactly. False also when the
    sum overflows (values near the float limit): the row loop then judges them one by one."""
    try:
        if not math.isfinite(sum(values)):
            return False
    except OverflowError:
        return False
    return min(values) >= lo and max(values) <= hi


class _Where(int):
    """A row's place for an example, rendered only when a row is refused."""

    def __str__(self) -> str:
        return f"row {int(self)}"

    def __format__(self, spec) -> str:
        return format(str(self), spec)


def _samples(batch, name, section, ref_field, known, metrics: tuple[Metric, ...], out,
             window: "_Window", *, with_job=False) -> None:
    if section is None:
        return
    if not isinstance(section, dict):
        batch.reject(f"{name}: must be an object with fields and rows", type(section).__name__)
        return
    fields, rows = section.get("fields"), section.get("rows")
    if rows == [] and type(rows) is list:
        return  # an empty section (a node without NICs or jobs): nothing to check
    if not isinstance(rows, list):
        batch.reject(f"{name}: rows must be a list", type(rows).__name__)
        return
    layout = _layout(name, fields, ref_field, metrics, with_job)
    if isinstance(layout, str):
        for _ in rows:
            batch.reject(layout, _show(fields, 80))
        return
    plan, ts_at, ref_at = layout.plan, layout.ts_at, layout.ref_at
    job_at, width = layout.job_at, layout.width
    clean = _clean_rows(rows, layout, ref_field == "job", known,
                        batch.jobs if with_job else None, window)
    if clean is not None:
        out.extend(clean)
        return
    if type(rows) is TypedRows:  # the row-by-row check takes rows as sent: lists
        rows = list(map(list, rows))
    seen: set = set()
    for i, row in enumerate(rows):
        where = _Where(i)
        if not isinstance(row, list):
            batch.reject(f"{name}: row must be a list", where)
            continue
        if len(row) != width:
            batch.reject(f"{name}: row has {len(row)} values for {width} fields", where)
            continue
        ts, err = _timestamp(row[ts_at], window)
        if err:
            batch.reject(f"{name}: {err}", f"{where}: {_show(row[ts_at], 40)}")
            continue
        if ref_field == "job":
            ref, err = text(row[ref_at], 128, required=True)
            if not err and ref not in known:
                err = "is not one of this batch's jobs"
            if err:
                batch.reject(f"{name}: job {err}", f"{where}: {_show(row[ref_at], 40)}")
                continue
        else:
            ref, err = _index(row[ref_at], known)
            if err:
                batch.reject(f"{name}: {ref_field} {err}", f"{where}: {_show(row[ref_at], 40)}")
                continue
        key = (ref, ts)
        if key in seen:
            batch.reject(f"{name}: duplicate ({ref_field}, ts) within the batch", where)
            continue
        values = []
        bad = None
        if with_job:
            job = None if job_at is None else row[job_at]
            if job is not None:
                job, err = text(job, 128, required=True)
                if not err and job not in batch.jobs:
                    err = "is not one of this batch's jobs"
                if err:
                    bad = (f"{name}: job {err}", f"{where}: {_show(row[job_at], 40)}")
            values.append(job)
        for metric, at in plan:
            if at is None:
                values.append(None)
                continue
            value = row[at]
            # The common cases inline (a call per value is most of validation's cost): a
            # float in range (NaN fails the comparison), or an int in range.
            kind = type(value)
            if kind is float and not metric.integer and metric.lo <= value <= metric.hi:
                values.append(value)
                continue
            if kind is int and metric.lo <= value <= metric.hi:
                values.append(value if metric.integer else float(value))
                continue
            value, err = _optional_number(value, metric.lo, metric.hi, integer=metric.integer)
            if err:
                bad = (f"{name}: {metric.name} {err}", f"{where}: {_show(row[at], 40)}")
                break
            values.append(value)
        if bad:
            batch.reject(*bad)
            continue
        seen.add(key)
        out.append((ts, ref, *values))


def _events(batch: Batch, value, window: "_Window") -> None:
    for position, entry in enumerate(_entries(batch, "events", value, MAX_EVENTS)):
        where = f"events[{position}]"
        if not isinstance(entry, dict):
            batch.reject("events: entry must be an object", where)
            continue
        ts, err = _timestamp(entry.get("ts"), window)
        if err:
            batch.reject(f"events: {err}", where)
            continue
        gpu, err = _index(entry.get("gpu"), batch.gpus)
        if err:
            batch.reject(f"events: gpu {err}", where)
            continue
        kind, err = text(entry.get("kind"), 32, required=True)
        if err:
            batch.reject(f"events: kind {err}", where)
            continue
        code, err = _optional_number(entry.get("code"), -(1 << 31), (1 << 31) - 1, integer=True)
        if err:
            batch.reject(f"events: code {err}", where)
            continue
        message, err = text(entry.get("message"), 4096)
        if err:
            batch.reject(f"events: message {err}", where)
            message = ""
        batch.events.append({"ts": ts, "gpu": gpu, "kind": kind, "code": code,
                             "message": message[:512]})
