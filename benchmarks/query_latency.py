#!/usr/bin/env python
"""Query latency at scale (issue 8, benchmark c): server time of the pages and API calls
people wait for, on a database the size of a 1,000-node cluster's week.

    python benchmarks/query_latency.py [--rebuild] [--runs 20] [--only NAME ...]

The database (``clusterui_bench_scale``) is built once and reused: each build step records
itself in the table ``bench_build`` when it has committed, so an interrupted build resumes
at the missing step and a complete one costs nothing; ``--rebuild`` drops it and starts
over. Migrations are applied on every run, so new indexes land on the existing data.

What it holds: 1,000 nodes x 8 H100 GPUs with 4 InfiniBand ports and an Ethernet port
each; over 1,000,000 jobs packed onto those GPUs over 7 days the way a scheduler would
(mostly short 1-8 GPU jobs on 840 nodes, multi-node 16-64 GPU jobs of hours to days on
160 nodes, users and accounts with a heavy tail, Slurm and Kubernetes), each job's GPU
allocations, its efficiency row shaped as the detector pass writes it (per-GPU figures
and accumulators), findings where its behaviour would raise them, and the latest tables.
GPU telemetry at 10 s in the product's storage form (``--telemetry``): by default a week
for the nine nodes the cases read and the last 26 hours for the other 991, so the day
partitions a 24-hour read touches hold the whole cluster (about 69M GPU samples).

The data has its own "now" (when it was built): the timings run with Django's clock set
to it, so a database built yesterday is timed as it was then.

Each case is timed in-process (Django's test client: views, queries, templates, figures,
JSON; no network), a warm-up request first, then median and p95 over ``--runs`` requests,
with the number of SQL queries, against the issue's targets for this 2-core machine.
"""

import argparse
import datetime as dt
import io
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASE_DB = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/clusterui")
BENCH_NAME = "clusterui_bench_scale"
BENCH_DB = BASE_DB.rsplit("/", 1)[0] + "/" + BENCH_NAME
os.environ.update(DATABASE_URL=BENCH_DB, DEBUG="1", DJANGO_SETTINGS_MODULE="clusterui.settings",
                  ALLOWED_HOSTS="testserver,localhost", LOG_LEVEL="WARNING")

NODES = 1000
GPUS_PER_NODE = 8
MULTI_NODES = 160  # nodes 1..160 run multi-node jobs, in blocks of 8 nodes
BLOCK = 8
DAYS = 7
INTERVAL_S = 10
H100 = ("NVIDIA H100 80GB HBM3", 81559, 700.0, 450e9)
IB = 50e9
ETH = 25e9 / 8
SEED = 8
DAY_WINDOW_H = 26  # --telemetry day: the other nodes' hours (a 24 h read and the hot hour)

# A job's behaviour, drawn from its id: (name, weight, GPU busy % mean, findings it raises).
# The mix follows the simulator's scenarios (collectors/sim/scenarios.py).
BEHAVIOURS = (
    ("healthy", 45, 92.0, ()),
    ("moderate", 15, 58.0, ()),
    ("idle", 8, 1.0, ("low_utilization",)),
    ("idle_gpus", 5, None, ("idle_gpu", "low_utilization")),
    ("spiky_low", 7, 14.0, ("low_utilization",)),
    ("input_bound", 7, 18.0, ("input_bound", "low_utilization")),
    ("comm_bound", 5, 38.0, ("comm_bound",)),
    ("busy_not_busy", 4, 8.0, ("busy_not_busy",)),
    ("throttling", 4, 88.0, ("throttling",)),
)
FINDING_TEXT = {
    "low_utilization": ("Low GPU utilization: {u:.0f} % on {g} GPUs",
                        "The job's GPUs averaged {u:.0f} % SM activity over the window.",
                        "Request fewer GPUs, or check that the job is not waiting on I/O."),
    "idle_gpu": ("{i} of {g} allocated GPUs idle", "Some GPUs did nothing while others worked.",
                 "Ask for only the GPUs the job uses, or check its device selection."),
    "input_bound": ("Input-bound: host CPUs saturated", "The host CPUs were saturated while "
                    "the GPUs waited.", "Use more data-loader workers or faster storage."),
    "comm_bound": ("Communication-bound", "The GPUs waited while the fabric ran near capacity.",
                   "Overlap communication with compute, or use fewer, larger nodes."),
    "busy_not_busy": ("Looks busy but is not", "NVML reads busy while SM activity is low.",
                      "Batch small kernels together (CUDA graphs, larger batches)."),
    "throttling": ("Thermal or power throttling", "The SM clock was held down by the GPU.",
                   "Check the node's cooling and power capping."),
}
# Build steps, in order, with the version of the code that makes them: a step whose
# version changed is rebuilt (and every step after it).
STEPS = {"jobs": 1, "telemetry": 4, "nic_rollups": 2}


def admin_url() -> str:
    return BASE_DB.rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1) + "/postgres"


def prepare_database(rebuild: bool) -> None:
    """Create the database when it is missing (or dropped by --rebuild) and migrate it."""
    import psycopg

    with psycopg.connect(admin_url(), autocommit=True) as conn:
        if rebuild:
            conn.execute(f"DROP DATABASE IF EXISTS {BENCH_NAME} WITH (FORCE)")
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                            [BENCH_NAME]).fetchone():
            conn.execute(f"CREATE DATABASE {BENCH_NAME}")
    began = time.perf_counter()
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, check=True)
    print(f"migrated in {time.perf_counter() - began:.1f} s", flush=True)


# --- the build record --------------------------------------------------------------------

def built_steps() -> dict[str, dict]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("""CREATE TABLE IF NOT EXISTS bench_build (
                           step text PRIMARY KEY, version int NOT NULL, seconds float NOT NULL,
                           done_at timestamptz NOT NULL DEFAULT now(), info jsonb NOT NULL)""")
        cur.execute("SELECT step, version, seconds, info FROM bench_build")
        # Django's connection reads jsonb as text.
        return {s: {"version": v, "seconds": sec, **json.loads(info)}
                for s, v, sec, info in cur.fetchall()}


def record_step(step: str, seconds: float, info: dict) -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("INSERT INTO bench_build (step, version, seconds, info) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (step) DO UPDATE SET version = EXCLUDED.version, "
                    "seconds = EXCLUDED.seconds, done_at = now(), info = EXCLUDED.info",
                    [step, STEPS[step], seconds, json.dumps(info)])


def forget_steps(steps) -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("DELETE FROM bench_build WHERE step = ANY(%s)", [list(steps)])


def say(what: str, began: float) -> None:
    print(f"  {what} ({time.perf_counter() - began:.1f} s)", flush=True)


# --- the schedule: which job ran on which GPUs when --------------------------------------

class Schedule:
    """Jobs packed onto the cluster's GPUs over the week, as numpy arrays (one entry per job):
    start and end (Unix s; end beyond ``now`` means still running), first node (1-based),
    nodes, first GPU index on the node and GPUs per node."""

    # Layouts of one node (GPUs per job group) and of a block of nodes (nodes per job).
    NODE_LAYOUTS = ((8,), (4, 4), (2, 2, 2, 2), (1,) * 8, (4, 2, 1, 1), (2, 2, 1, 1, 1, 1),
                    (4, 1, 1, 1, 1))
    NODE_WEIGHTS = (0.12, 0.14, 0.14, 0.25, 0.15, 0.12, 0.08)
    BLOCK_LAYOUTS = ((8,), (4, 4), (2, 2, 2, 2), (4, 2, 2))
    BLOCK_WEIGHTS = (0.2, 0.3, 0.3, 0.2)
    # Median minutes of a job by GPUs (log-normal, sigma 1.3): short tests to long runs.
    MEDIAN_MIN = {1: 14.0, 2: 20.0, 4: 32.0, 8: 50.0}

    def __init__(self, now: float) -> None:
        self.now = now
        self.t0 = now - DAYS * 86400
        rng = np.random.default_rng(SEED)
        cols = {k: [] for k in ("start", "end", "node", "nodes", "gpu0", "gpus")}

        def add(start, end, node, nodes, gpu0, gpus):
            n = len(start)
            cols["start"].append(start)
            cols["end"].append(end)
            for k, v in (("node", node), ("nodes", nodes), ("gpu0", gpu0), ("gpus", gpus)):
                cols[k].append(np.full(n, v, dtype=np.int32))

        def run_jobs(lo, hi, median_s, gap_s):
            """Back-to-back jobs in [lo, hi): starts and ends (the last one cut at hi)."""
            k = int((hi - lo) / (median_s + gap_s)) * 2 + 8
            dur = np.maximum(60.0, rng.lognormal(np.log(median_s), 1.3, k))
            gaps = rng.exponential(gap_s, k)
            starts = lo + np.concatenate([[gaps[0]], np.cumsum(dur + gaps)[:-1] + gaps[1:]])
            keep = starts < min(hi, now)
            starts, dur = starts[keep], dur[keep]
            return starts, np.minimum(starts + dur, hi)

        horizon = now + 3 * 86400  # segments run past now: their jobs are the running ones
        for node in range(MULTI_NODES + 1, NODES + 1):
            t = self.t0 - rng.uniform(0, 6 * 3600)
            while t < now:
                seg_end = t + rng.uniform(4, 24) * 3600
                if seg_end > now:
                    seg_end = horizon
                layout = self.NODE_LAYOUTS[rng.choice(len(self.NODE_LAYOUTS),
                                                      p=self.NODE_WEIGHTS)]
                gpu0 = 0
                for size in layout:
                    s, e = run_jobs(t, seg_end, self.MEDIAN_MIN[size] * 60, 120)
                    add(s, e, node, 1, gpu0, size)
                    gpu0 += size
                t = seg_end
        for first in range(1, MULTI_NODES + 1, BLOCK):
            t = self.t0 - rng.uniform(0, 24 * 3600)
            # Block 1 ends its mix 30 hours ago: then the benchmark's 64-GPU job runs there.
            until = now - 30 * 3600 if first == 1 else now
            while t < until:
                seg_end = t + rng.uniform(24, 72) * 3600
                if first == 1 and seg_end > until:
                    seg_end = until
                elif seg_end > now:
                    seg_end = horizon
                layout = self.BLOCK_LAYOUTS[rng.choice(len(self.BLOCK_LAYOUTS),
                                                       p=self.BLOCK_WEIGHTS)]
                node = first
                for size in layout:
                    s, e = run_jobs(t, seg_end, 4 * 3600, 600)
                    add(s, e, node, size, 0, GPUS_PER_NODE)
                    node += size
                t = seg_end
            if first == 1:
                add(np.array([now - 30 * 3600]), np.array([horizon]), 1, BLOCK, 0, GPUS_PER_NODE)
        order = np.argsort(np.concatenate(cols["start"]), kind="stable")
        for k, parts in cols.items():
            setattr(self, k, np.concatenate(parts)[order])
        self.total_gpus = self.nodes * self.gpus
        self.running = self.end > now
        self.ids = np.arange(1, len(self.start) + 1, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.start)


def behaviour_of(ids: np.ndarray) -> np.ndarray:
    """Each job's behaviour (an index into BEHAVIOURS), a fixed function of its id."""
    weights = np.array([b[1] for b in BEHAVIOURS], dtype=float)
    edges = np.cumsum(weights / weights.sum())
    u = ((ids * 2654435761) % 2**32) / 2**32
    return np.searchsorted(edges, u, side="right").clip(0, len(BEHAVIOURS) - 1)


# --- writing -----------------------------------------------------------------------------

def _ts(seconds: np.ndarray) -> list[str]:
    """Unix seconds as PostgreSQL text timestamps (UTC), fast."""
    base = np.datetime64("1970-01-01T00:00:00")
    stamps = (base + (seconds * 1e6).astype("timedelta64[us]")).astype(str)
    return [s + "+00" for s in stamps]


def copy_text(cur, table: str, columns: tuple[str, ...], lines) -> int:
    """COPY tab-separated ``lines`` (already escaped) into ``table``, in 8 MB writes."""
    n = 0
    with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        buf = io.StringIO()
        for line in lines:
            buf.write(line)
            buf.write("\n")
            n += 1
            if buf.tell() > 8 << 20:
                copy.write(buf.getvalue())
                buf = io.StringIO()
        copy.write(buf.getvalue())
    return n


def build_jobs(now: float) -> dict:
    """Inventory, jobs, allocations, efficiency, findings and the latest tables."""
    from django.db import connection, transaction

    began = time.perf_counter()
    sched = Schedule(now)
    n = len(sched)
    say(f"scheduled {n:,} jobs on {NODES * GPUS_PER_NODE:,} GPUs over {DAYS} days", began)
    rng = np.random.default_rng(SEED + 1)
    t0 = sched.t0
    with transaction.atomic(), connection.cursor() as wrapper:
        cur = wrapper.cursor
        # Bulk load: foreign keys are not checked row by row (the generator keeps them).
        cur.execute("SET LOCAL session_replication_role = replica")
        cur.execute("TRUNCATE inventory_cluster, inventory_node, inventory_gpu, inventory_nic, "
                    "jobs_job, jobs_jobgpu, findings_jobefficiency, findings_finding, "
                    "telemetry_gpulatest, telemetry_niclatest CASCADE")
        stamp = _ts(np.array([t0, now]))
        cur.execute("INSERT INTO inventory_cluster (id, name, created_at) "
                    "VALUES (1, 'bench', %s)", [stamp[0]])
        copy_text(cur, "inventory_node", ("id", "cluster_id", "name", "agent_version",
                                          "simulated", "sample_interval_s", "first_seen",
                                          "last_seen"),
                  (f"{i}\t1\tgpu-{i:04d}\t0.1.0\tf\t{INTERVAL_S}\t{stamp[0]}\t{stamp[1]}"
                   for i in range(1, NODES + 1)))
        copy_text(cur, "inventory_gpu", ("id", "node_id", "uuid", "index", "model",
                                         "memory_total_mib", "power_limit_w", "pci_bus_id",
                                         "nvlink_bytes_per_s", "first_seen", "last_seen"),
                  (f"{(i - 1) * 8 + g + 1}\t{i}\tGPU-{i:04d}-{g}\t{g}\t{H100[0]}\t{H100[1]}\t"
                   f"{H100[2]}\t00000000:{0x18 + g * 16:02X}:00.0\t{H100[3]}\t{stamp[0]}\t"
                   f"{stamp[1]}" for i in range(1, NODES + 1) for g in range(GPUS_PER_NODE)))
        copy_text(cur, "inventory_nic", ("id", "node_id", "name", "kind", "link_bytes_per_s",
                                         "first_seen", "last_seen"),
                  (f"{(i - 1) * 5 + k + 1}\t{i}\t"
                   + (f"mlx5_{k}:1\tinfiniband\t{IB}" if k < 4 else f"eth0\tethernet\t{ETH}")
                   + f"\t{stamp[0]}\t{stamp[1]}" for i in range(1, NODES + 1) for k in range(5)))
        say("inventory", began)

        # Users with a heavy tail (a few run most jobs), each in one account.
        users = np.array([f"u{k:03d}" for k in range(400)])
        user_w = 1.0 / np.arange(1, 401) ** 0.9
        user_of = rng.choice(400, n, p=user_w / user_w.sum())
        accounts = np.array([f"acct{k:02d}" for k in range(40)])[np.arange(400) % 40]
        names = np.array(["llama-ft", "llama-70b-pretrain", "resnet50", "bert-base", "vit-l16",
                          "diffusion-xl", "eval-sweep", "jupyter", "vllm-serve", "rl-ppo",
                          "whisper-ft", "data-prep", "mixtral-moe", "gnn-train", "protein-fold"])
        name_of = rng.integers(0, len(names), n)
        k8s = (sched.nodes == 1) & (rng.random(n) < 0.1)
        running = sched.running
        start_s, end_s = _ts(sched.start), _ts(np.minimum(sched.end, now))
        first_seen = _ts(np.maximum(sched.start, t0))
        partition = np.where(sched.nodes > 1, "gpu-long", "gpu")
        cpus = sched.total_gpus * 12

        def job_lines():
            for k in range(n):
                jid = k + 1
                if k8s[k]:
                    sch, ext, part = "kubernetes", f"ml/{names[name_of[k]]}-{jid:07x}", ""
                else:
                    sch, ext, part = "slurm", str(4_000_000 + jid), partition[k]
                ended = "\\N" if running[k] else end_s[k]
                yield (f"{jid}\t1\t{sch}\t{ext}\t{users[user_of[k]]}\t"
                       f"{names[name_of[k]]}-{jid % 97}\t{accounts[user_of[k]]}\t{part}\t"
                       f"{'running' if running[k] else 'ended'}\t{start_s[k]}\t{ended}\t"
                       f"{cpus[k]}\t{first_seen[k]}\t{end_s[k]}")

        copy_text(cur, "jobs_job", ("id", "cluster_id", "scheduler", "external_id", '"user"',
                                    "name", "account", "partition", "state", "started_at",
                                    "ended_at", "cpus", "first_seen", "last_seen"), job_lines())
        say(f"{n:,} jobs", began)

        # Allocations: job k holds GPUs gpu0..gpu0+gpus-1 of nodes node..node+nodes-1.
        def gpu_ids(k):
            return [(node - 1) * GPUS_PER_NODE + g + 1
                    for node in range(sched.node[k], sched.node[k] + sched.nodes[k])
                    for g in range(sched.gpu0[k], sched.gpu0[k] + sched.gpus[k])]

        copy_text(cur, "jobs_jobgpu", ("job_id", "gpu_id", "first_seen", "last_seen"),
                  (f"{k + 1}\t{g}\t{first_seen[k]}\t{end_s[k]}"
                   for k in range(n) for g in gpu_ids(k)))
        say(f"{int(sched.total_gpus.sum()):,} GPU allocations", began)

        # Efficiency as the detector pass leaves it: window from the first sample to the
        # newest; busy per GPU around the behaviour's mean; wasted = allocated - used.
        kinds = behaviour_of(sched.ids)
        w_start = np.maximum(sched.start, t0)
        w_end = np.minimum(sched.end, now)
        wall_h = (w_end - w_start) / 3600
        has_eff = sched.start < now - 120  # a job in its first two minutes has none yet
        win_s, win_e = _ts(w_start), _ts(w_end)
        computed = _ts(np.minimum(w_end + 30, now))

        def eff_lines():
            for k in range(n):
                if not has_eff[k]:
                    continue
                name, _w, mean, _f = BEHAVIOURS[kinds[k]]
                gpus = gpu_ids(k)
                g_n = len(gpus)
                if mean is None:  # idle_gpus: one GPU works, the rest idle
                    means = np.r_[90.0, np.zeros(g_n - 1)] + rng.uniform(0, 2, g_n)
                else:
                    means = np.clip(mean + rng.normal(0, 3, g_n), 0, 100)
                h = wall_h[k]
                samples = max(1, int(h * 360))
                used = float(means.sum()) / 100 * h
                alloc = g_n * h
                per_gpu, acc = {}, {}
                for gid, m in zip(gpus, means, strict=True):
                    node, idx = (gid - 1) // 8 + 1, (gid - 1) % 8
                    m = round(float(m), 2)
                    lo, hi = max(0.0, m - 9), min(100.0, m + 7)
                    per_gpu[f"GPU-{node:04d}-{idx}"] = {
                        "index": idx, "node": f"gpu-{node:04d}", "samples": samples, "mean": m,
                        "p10": round(lo, 1), "p90": round(hi, 1), "nvml_mean": min(100, m + 6),
                        "source": "sm_active", "mem_peak_mib": 52000 + idx * 900,
                        "energy_j": round(h * 3600 * (120 + 5 * m)),
                        "wasted_gpu_hours": round(h * (1 - m / 100), 4)}
                    acc[str(gid)] = {
                        "n": samples, "util_sum": samples * m, "util_n": samples,
                        "sm_sum": samples * m, "sm_n": samples, "busy_sum": samples * m,
                        "busy_n": samples, "mem_max": 52000 + idx * 900,
                        "hist": {str(int(b)): samples // 6 for b in np.linspace(lo, hi, 6)},
                        "energy_j": round(h * 3600 * (120 + 5 * m)), "energy_last": 1.0e9,
                        "nvl_sum": samples * 12.0, "nvl_n": samples, "nvl_max": 41.0,
                        "first_ts": win_s[k], "last_ts": win_e[k]}
                accum = {"gpus": acc, "job": {"nic_n": samples, "nic_sum": samples * 20.0,
                                              "nic_max": 70.0, "net_bytes": h * 3600 * 4e9,
                                              "cpu_ts_n": samples,
                                              "cpu_cores_sum": samples * 10.0}}
                final = "\\N" if running[k] else computed[k]
                yield (f"{k + 1}\t{computed[k]}\t{win_s[k]}\t{win_e[k]}\t{g_n}\t{alloc}\t{used}\t"
                       f"{max(0.0, alloc - used)}\tsm_active\t{float(means.mean())}\t"
                       f"{json.dumps(per_gpu)}\t{52000 + 6300}\t{H100[1]}\t"
                       f"{h * 3600 * g_n * 400}\t{h * 3600 * 4e9}\t20\t70\t12\t41\t"
                       f"{10.0 * sched.nodes[k]}\t{cpus[k]}\t{json.dumps(accum)}\t{final}\t"
                       f"{win_e[k]}")

        eff = copy_text(cur, "findings_jobefficiency", (
            "job_id", "computed_at", "window_start", "window_end", "gpus",
            "gpu_hours_allocated", "gpu_hours_used", "gpu_hours_wasted", "util_source",
            "util_mean_pct", "per_gpu", "mem_peak_mib", "mem_capacity_mib", "energy_j",
            "net_bytes", "nic_util_mean_pct", "nic_util_peak_pct", "nvlink_util_mean_pct",
            "nvlink_util_peak_pct", "cpu_cores_mean", "cpus_allocated", "accum",
            "finalized_at", "through"), eff_lines())
        say(f"{eff:,} efficiency rows", began)

        # Findings: what each behaviour raises, once the job ran 10 minutes; open while
        # the job runs, closed when it ended.
        def finding_lines():
            fid = 0
            for k in np.flatnonzero(has_eff & (wall_h >= 1 / 6)):
                name, _w, mean, raised = BEHAVIOURS[kinds[k]]
                g_n = int(sched.total_gpus[k])
                u = 45.0 / g_n if mean is None else mean
                for kind in raised:
                    fid += 1
                    title, why, fix = FINDING_TEXT[kind]
                    severity = "critical" if u < 10 and g_n >= 4 else "warning"
                    state = "open" if running[k] else "closed"
                    closed = "\\N" if running[k] else win_e[k]
                    wasted = g_n * wall_h[k] * (1 - u / 100)
                    evidence = json.dumps({"util_mean_pct": round(u, 1), "gpus": g_n})
                    yield (f"{fid}\t{kind}\t{severity}\t{state}\t{win_s[k]}\t{win_e[k]}\t"
                           f"{win_s[k]}\t{win_e[k]}\t{closed}\t{evidence}\t{wasted}\t"
                           f"{title.format(u=u, g=g_n, i=g_n - 1)}\t{why.format(u=u)}\t{fix}\t"
                           f"{'warning' if state == 'closed' else ''}\t{k + 1}\t{sched.node[k]}")

        found = copy_text(cur, "findings_finding", (
            "id", "kind", "severity", "state", "window_start", "window_end", "first_seen",
            "last_seen", "closed_at", "evidence", "wasted_gpu_hours", "title", "explanation",
            "suggestion", "emailed_severity", "job_id", "node_id"), finding_lines())
        say(f"{found:,} findings", began)

        # The latest tables: every GPU's newest sample, with the job it runs now.
        owner = {}
        for k in np.flatnonzero(running):
            for g in gpu_ids(k):
                owner[g] = k
        last = _ts(np.array([now]))[0]

        def latest_lines():
            for gid in range(1, NODES * GPUS_PER_NODE + 1):
                k = owner.get(gid)
                if k is None:
                    yield f"{gid}\t{last}\t\\N\t0\t0\t600\t70\t31\t1980\t0\t0\t0"
                    continue
                mean = BEHAVIOURS[kinds[k]][2]
                busy = 90.0 if mean is None and gid % 8 == sched.gpu0[k] else (mean or 1.0)
                util = min(100.0, busy + 6 + rng.normal(0, 3))
                yield (f"{gid}\t{last}\t{k + 1}\t{util:.0f}\t{busy:.1f}\t61000\t"
                       f"{120 + 5.4 * busy:.0f}\t{40 + busy / 3:.0f}\t1980\t{busy:.1f}\t"
                       f"{busy / 2:.1f}\t{busy / 1.5:.1f}")

        copy_text(cur, "telemetry_gpulatest", (
            "gpu_id", "ts", "job_id", "util_pct", "sm_active_pct", "mem_used_mib", "power_w",
            "temp_c", "sm_clock_mhz", "tensor_active_pct", "dram_active_pct", "mem_util_pct"),
            latest_lines())
        copy_text(cur, "telemetry_niclatest", ("nic_id", "ts", "rx_bytes_per_s",
                                               "tx_bytes_per_s"),
                  (f"{i}\t{last}\t{rng.uniform(0.05, 0.7) * IB}\t{rng.uniform(0.05, 0.7) * IB}"
                   for i in range(1, NODES * 5 + 1)))
        for table in ("inventory_cluster", "inventory_node", "inventory_gpu", "inventory_nic",
                      "jobs_job", "jobs_jobgpu", "findings_finding"):
            cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"(SELECT max(id) FROM {table}))")
        say("latest tables", began)
    with connection.cursor() as cur:
        for table in ("jobs_job", "jobs_jobgpu", "findings_jobefficiency", "findings_finding",
                      "inventory_gpu", "inventory_node", "inventory_nic", "telemetry_gpulatest"):
            cur.execute(f"VACUUM ANALYZE {table}")
    say("VACUUM ANALYZE", began)
    big = int(np.flatnonzero((sched.total_gpus == 64) & running & (sched.node == 1))[0]) + 1
    return {"now": now, "t0": t0, "jobs": n, "allocations": int(sched.total_gpus.sum()),
            "efficiency": eff, "findings": found, "running": int(running.sum()),
            "big_job": big}


# --- GPU telemetry in the product's storage form ---------------------------------------------



def gpu_samples(gpu_id: int, allocations, t0: float, now: float, rng):
    """One GPU's week at 10 s: (ts ms, job, values, nulls), shaped by the behaviour of the
    job it ran at each moment (``BEHAVIOURS``, as the simulator's scenarios), idle between."""
    ts = np.arange(t0 + INTERVAL_S, now + 1e-6, INTERVAL_S)
    n = len(ts)
    job = np.zeros(n, np.int64)
    busy = np.zeros(n)
    sm_factor = np.ones(n)
    mem = np.full(n, 600.0)
    throttle = np.zeros(n, np.int64)
    nvl = np.zeros(n)
    for job_id, lowest_gpu, first, last in allocations:
        lo, hi = np.searchsorted(ts, [first, last])
        if hi <= lo:
            continue
        kind = BEHAVIOURS[behaviour_of(np.array([job_id]))[0]]
        job[lo:hi] = job_id
        mean = kind[2]
        if mean is None:  # idle_gpus: only the job's first GPU works
            mean = 90.0 if gpu_id == lowest_gpu else 0.5
        busy[lo:hi] = mean
        if kind[0] == "busy_not_busy":
            sm_factor[lo:hi] = 0.1
            busy[lo:hi] = 98.0
        if kind[0] == "throttling":
            throttle[lo:hi] = 0x20 | 0x40
        if kind[0] == "comm_bound":
            nvl[lo:hi] = 0.6
        mem[lo:hi] = 20000 + (job_id * 7919) % 55000
    t = ts - t0
    wave = 1 + 0.06 * np.sin(2 * np.pi * t / (180 + gpu_id % 60))
    util = np.clip(busy * wave + rng.normal(0, 3, n) * (busy > 1), 0, 100).round()
    sm = np.clip(util * 0.82 * sm_factor + rng.normal(0, 1.5, n) * (busy > 1), 0, 100)
    power = np.clip(68 + 5.6 * sm + rng.normal(0, 6, n), 60, 700)
    temp = np.where(throttle > 0, 88.0, 33 + util / 3.2) + rng.normal(0, 0.7, n)
    link = (nvl + 0.05 * sm / 100) * 450e9 * (1 + 0.1 * rng.standard_normal(n)).clip(0.5)
    values = {
        "util_pct": util, "mem_util_pct": (sm * 0.5).round(1),
        "mem_used_mib": (mem + rng.integers(0, 200, n) * (busy > 1)).astype(np.int64),
        "power_w": power.round(3), "temp_c": temp.round(), "sm_clock_mhz":
            np.where(throttle > 0, 1320.0, np.where(busy > 1, 1980.0, 345.0)),
        "sm_active_pct": sm.round(2), "tensor_active_pct": (sm * 0.45).round(2),
        "dram_active_pct": (sm * 0.6).round(2),
        "pcie_tx_bytes_per_s": (1e8 + sm * 2e7).astype(np.float32).astype(np.float64),
        "pcie_rx_bytes_per_s": (2e8 + sm * 4e7).astype(np.float32).astype(np.float64),
        "nvlink_tx_bytes_per_s": link.astype(np.float32).astype(np.float64),
        "nvlink_rx_bytes_per_s": (link * 0.98).astype(np.float32).astype(np.float64),
        "throttle_reasons": throttle,
        "energy_j": (1e9 + np.cumsum(power * INTERVAL_S)).round(3),
    }
    nulls = {m: np.zeros(n, bool) for m in values}
    return (ts * 1000).round().astype(np.int64), job, values, nulls


def gpu_copy_kinds() -> dict[str, str]:
    """Each GPU metric's binary COPY kind (``pgcopy.TYPES``), from its SQL type."""
    from clusterui.telemetry.metrics import GPU_METRICS

    kind = {"real": "float4", "integer": "int4", "bigint": "int8", "double precision": "float8"}
    return {m.name: kind[m.sql_type] for m in GPU_METRICS}


def _pack_group(group: list[int], starts: dict[int, float], now: float, hot_from_ms: int, rng
                ) -> tuple[int, int]:
    """Samples for these nodes' GPUs from each node's start (``starts``) to ``now``: packed
    chunks and rollups (``packed.write_hours``) before ``hot_from_ms``, the hot table after
    it."""
    from django.db import connection, transaction

    from clusterui.telemetry import packed
    from clusterui.telemetry.metrics import GPU_METRIC_NAMES, GPU_SAMPLE_TABLE

    gpu_ids = [(nd - 1) * GPUS_PER_NODE + g + 1 for nd in group for g in range(GPUS_PER_NODE)]
    with connection.cursor() as cur:
        cur.execute("""SELECT a.gpu_id, a.job_id, min(b.gpu_id) OVER (PARTITION BY a.job_id),
                              extract(epoch FROM a.first_seen), extract(epoch FROM a.last_seen)
                       FROM jobs_jobgpu a JOIN jobs_jobgpu b ON b.job_id = a.job_id
                       WHERE a.gpu_id = ANY(%s) ORDER BY a.gpu_id, a.first_seen""", [gpu_ids])
        rows = cur.fetchall()
    by_gpu: dict[int, list] = {}
    for gpu_id, job_id, lowest, first, last in rows:
        by_gpu.setdefault(gpu_id, []).append((job_id, lowest, float(first), float(last)))
    # Each hour is written for all these GPUs at once: a job's rollup for an hour is made
    # from all its GPUs' minutes (every job here runs within these nodes).
    kinds = gpu_copy_kinds()
    hours: dict[int, list] = {}
    samples = chunks = 0
    with transaction.atomic(), connection.cursor() as wrapper:
        cur = wrapper.cursor
        for gpu_id in gpu_ids:
            t0 = starts[(gpu_id - 1) // GPUS_PER_NODE + 1]
            ts, job, values, nulls = gpu_samples(gpu_id, sorted(set(by_gpu.get(gpu_id, []))),
                                                 t0, now, rng)
            old = ts < hot_from_ms
            for g, block in packed.split_hours(
                    np.full(int(old.sum()), gpu_id, np.int64), ts[old], job[old],
                    {m: v[old] for m, v in values.items()},
                    {m: v[old] for m, v in nulls.items()}):
                hours.setdefault(block.start, []).append((g, block))
            hot = ~old
            packed.copy_arrays(cur, GPU_SAMPLE_TABLE, [
                ("ts", "timestamptz_ms", ts[hot], None),
                ("gpu_id", "int4", np.full(int(hot.sum()), gpu_id), None),
                ("job_id", "int4", job[hot], job[hot] == 0),
                *[(m, kinds[m], values[m][hot], None) for m in GPU_METRIC_NAMES]])
            samples += len(ts)
    for start in sorted(hours):
        with transaction.atomic():
            chunks += packed.write_hours(hours.pop(start), replace=False).chunks
    return samples, chunks


def build_telemetry(info: dict, nodes: list[int], day_nodes: list[int]) -> dict:
    """A week of samples for these nodes' GPUs, NICs and jobs, in the product's form: packed
    (GPU, hour) chunks with their 1-minute and 1-hour GPU and job rollups (``packed.
    write_hours``) up to compaction's horizon at the data's "now" (``compaction.horizon``:
    the current hour, and the last one for ``RAW_HOT_MINUTES`` after it closed), the hot
    table after that; NIC and job host samples in their raw tables.

    ``day_nodes`` (every other node, with ``--telemetry day``) get GPU samples for the last
    ``DAY_WINDOW_H`` hours only: every day-partitioned table then holds the whole
    cluster for the days a 24-hour read touches (partition pruning keeps the older days out
    of those reads), at a seventh of the week's build time.
    """
    from django.conf import settings
    from django.db import connection, transaction

    from clusterui.telemetry import packed, partitions
    from clusterui.telemetry.compaction import floor_hour
    from clusterui.telemetry.metrics import JOB_SAMPLE_TABLE, NIC_SAMPLE_TABLE

    began = time.perf_counter()
    now, t0 = info["now"], info["t0"]
    hot_from = floor_hour(dt.datetime.fromtimestamp(now, dt.UTC)
                          - dt.timedelta(minutes=settings.RAW_HOT_MINUTES))
    hot_from_ms = int(hot_from.timestamp() * 1000)
    days = {dt.date.fromtimestamp(t0) + dt.timedelta(days=d) for d in range(DAYS + 2)}
    partitions.forget_known()
    partitions.ensure_partitions(days)
    packed.ensure_partitions([int(t0 * 1000) + d * 86_400_000 for d in range(DAYS + 2)])
    rng = np.random.default_rng(SEED + 2)
    # Node groups of BLOCK: no job spans two (multi-node jobs run in blocks of 8 nodes), so
    # each hour of a group is written at once and each job-hour's rollup is whole; and one
    # group's week of samples fits in memory (about 0.5 GB).
    groups: dict[int, list[int]] = {}
    starts = {nd: t0 for nd in nodes}
    day_t0 = (now - DAY_WINDOW_H * 3600) // INTERVAL_S * INTERVAL_S
    starts.update({nd: day_t0 for nd in day_nodes if nd not in starts})
    for nd in sorted(starts):
        groups.setdefault((nd - 1) // BLOCK, []).append(nd)
    samples = chunks = 0
    for group in groups.values():
        s_, c_ = _pack_group(group, starts, now, hot_from_ms, rng)
        samples, chunks = samples + s_, chunks + c_
        say(f"nodes {group[0]}-{group[-1]}: {samples:,} samples, {chunks:,} hour chunks with "
            "their rollups", began)
    # NIC and job host samples stay raw (only GPU samples are packed).
    ts = np.arange(t0 + INTERVAL_S, now + 1e-6, INTERVAL_S)
    ts_ms = (ts * 1000).round().astype(np.int64)
    with transaction.atomic(), connection.cursor() as wrapper:
        cur = wrapper.cursor
        for nd in nodes:
            for port in range(5):
                nic_id = (nd - 1) * 5 + port + 1
                link = IB if port < 4 else ETH
                rate = link * np.clip(0.3 + 0.25 * np.sin(ts / 300 + port) +
                                      rng.normal(0, 0.05, len(ts)), 0.01, 0.95)
                packed.copy_arrays(cur, NIC_SAMPLE_TABLE, [
                    ("ts", "timestamptz_ms", ts_ms, None),
                    ("nic_id", "int4", np.full(len(ts), nic_id), None),
                    ("rx_bytes_per_s", "float8", rate, None),
                    ("tx_bytes_per_s", "float8", rate * 0.97, None)])
            cur.execute("""SELECT DISTINCT a.job_id, extract(epoch FROM a.first_seen),
                                  extract(epoch FROM a.last_seen), j.cpus
                           FROM jobs_jobgpu a JOIN jobs_job j ON j.id = a.job_id
                           WHERE a.gpu_id BETWEEN %s AND %s""",
                        [(nd - 1) * GPUS_PER_NODE + 1, nd * GPUS_PER_NODE])
            for job_id, first, last, cpus in cur.fetchall():
                lo, hi = np.searchsorted(ts, [float(first), float(last)])
                if hi <= lo:
                    continue
                kind = BEHAVIOURS[behaviour_of(np.array([job_id]))[0]][0]
                share = 0.95 if kind == "input_bound" else 0.3
                cores = np.clip(share * (cpus or 12) + rng.normal(0, 0.5, hi - lo), 0, None)
                packed.copy_arrays(cur, JOB_SAMPLE_TABLE, [
                    ("ts", "timestamptz_ms", ts_ms[lo:hi], None),
                    ("job_id", "int4", np.full(hi - lo, job_id), None),
                    ("node_id", "int4", np.full(hi - lo, nd), None),
                    ("cpu_cores_used", "float4", cores, None),
                    ("host_mem_used_bytes", "int8", np.full(hi - lo, 2 * 10**11), None)])
    say("NIC and job host samples", began)
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    say("ANALYZE", began)
    return {"telemetry_nodes": nodes, "day_nodes": len(day_nodes), "gpu_samples": samples,
            "chunks": chunks}


def build_nic_rollups(info: dict, nodes: list[int]) -> dict:
    """The NIC rollups of these nodes' NICs as compaction leaves them: every closed hour
    recomputed from the raw rows (``nicrollup.write_hours``), the current one due (as
    ingest marked it)."""
    from django.db import connection, transaction

    from clusterui.telemetry import nicrollup
    from clusterui.telemetry.metrics import NIC_ROLLUP_DUE_TABLE, NIC_ROLLUP_TABLES

    began = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(f"TRUNCATE {NIC_ROLLUP_DUE_TABLE}, {', '.join(NIC_ROLLUP_TABLES.values())}")
    now, t0 = info["now"], info["t0"]
    hot_from = int(now // 3600 * 3600)
    nic_ids = [(nd - 1) * 5 + port + 1 for nd in nodes for port in range(5)]
    hours = [dt.datetime.fromtimestamp(h, dt.UTC)
             for h in range(int(t0 // 3600 * 3600), hot_from, 3600)]
    for i in range(0, len(hours), 12):
        with transaction.atomic():
            nicrollup.write_hours([(n, h) for h in hours[i:i + 12] for n in nic_ids])
    hot = [dt.datetime.fromtimestamp(h, dt.UTC) for h in range(hot_from, int(now) + 1, 3600)]
    with connection.cursor() as cur:
        cur.execute(f"INSERT INTO {NIC_ROLLUP_DUE_TABLE} (nic_id, hour) "
                    "SELECT n, h FROM unnest(%s::int[]) n, unnest(%s::timestamptz[]) h",
                    [nic_ids, hot])
        cur.execute(f"ANALYZE {NIC_ROLLUP_DUE_TABLE}")
        for table in NIC_ROLLUP_TABLES.values():
            cur.execute(f"ANALYZE {table}")
    say(f"NIC rollups: {len(nic_ids)} NICs x {len(hours)} hours", began)
    return {"nic_hours": len(nic_ids) * len(hours)}


# --- timing --------------------------------------------------------------------------------

@contextmanager
def data_clock(now: float):
    """Django's clock at the data's "now" (advancing in real time from there)."""
    from django.utils import timezone

    offset = time.time() - now
    real = timezone.now

    def fake():
        return real() - dt.timedelta(seconds=offset)

    with mock.patch("django.utils.timezone.now", fake):
        yield


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def time_case(client, path: str, runs: int, **headers) -> tuple[list[float], int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(path, headers=headers)  # warm-up: imports, caches, buffers
    assert response.status_code == 200, f"{path}: HTTP {response.status_code}"
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        client.get(path, headers=headers)
        times.append((time.perf_counter() - began) * 1000)
    with CaptureQueriesContext(connection) as queries:
        size = len(client.get(path, headers=headers).content)
    return times, len(queries), size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true", help="drop the database and build it")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--only", nargs="*", default=[], help="cases whose name contains these")
    parser.add_argument(
        "--telemetry", choices=("timed", "day", "all"), default="day",
        help="GPU telemetry: a week for the nodes the cases read, and the last "
             f"{DAY_WINDOW_H} h for every other node (day, the default); a week for the "
             "read nodes only (timed); a week for every node (all: hours)")
    args = parser.parse_args()

    prepare_database(args.rebuild)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection

    nodes = (list(range(1, NODES + 1)) if args.telemetry == "all"
             else [*range(1, BLOCK + 1), NODES // 2])
    day_nodes = ([nd for nd in range(1, NODES + 1) if nd not in nodes]
                 if args.telemetry == "day" else [])
    done = built_steps()
    stale = False
    for step, version in STEPS.items():
        current = done.get(step, {}).get("version") == version and (
            step != "telemetry" or (done[step].get("telemetry_nodes") == nodes
                                    and done[step].get("day_nodes", 0) == len(day_nodes)))
        if not stale and current:
            continue
        stale = True
        forget_steps(list(STEPS)[list(STEPS).index(step):])
        began = time.perf_counter()
        print(f"building step {step!r}", flush=True)
        if step == "jobs":
            info = build_jobs(time.time() // 60 * 60)
        elif step == "nic_rollups":
            info = build_nic_rollups(done["jobs"], nodes)
        else:
            with connection.cursor() as cur:
                cur.execute("TRUNCATE telemetry_gpusample, telemetry_gpuchunk, "
                            "telemetry_gpurollup1mpack, telemetry_gpurollup5mpack, "
                            "telemetry_gpurollup1h, "
                            "telemetry_jobrollup1h, telemetry_nicsample, telemetry_jobsample")
            info = build_telemetry(done["jobs"], nodes, day_nodes)
        record_step(step, time.perf_counter() - began, info)
        done[step] = {"version": version, "seconds": time.perf_counter() - began, **info}
    info = done["jobs"]
    with connection.cursor() as cur:
        cur.execute("SELECT pg_database_size(current_database())")
        size = cur.fetchone()[0]
    built = dt.datetime.fromtimestamp(info["now"], dt.UTC)
    print(f"\ndatabase {BENCH_NAME}: {size / 2**30:.1f} GiB; data as of {built:%Y-%m-%d %H:%M} "
          f"UTC; {info['jobs']:,} jobs ({info['running']:,} running), "
          f"{info['allocations']:,} GPU allocations, {info['findings']:,} findings; "
          f"built in {sum(d['seconds'] for d in done.values()):.0f} s", flush=True)
    tele = done["telemetry"]
    week = NODES * GPUS_PER_NODE * DAYS * 86400 // INTERVAL_S
    day = (f" and the last {DAY_WINDOW_H} h for the other {tele['day_nodes']:,}"
           if tele.get("day_nodes") else "")
    print(f"GPU telemetry: {tele['gpu_samples']:,} samples at {INTERVAL_S} s: a week for "
          f"{len(tele['telemetry_nodes']):,} nodes{day} ({tele['chunks']:,} packed hour chunks "
          "with their rollups up to compaction's horizon, the hot table after it), built in "
          f"{tele['seconds']:.0f} s. NIC and job host samples: the week, for the "
          f"{len(tele['telemetry_nodes']):,} nodes. The whole cluster's week is "
          f"{week / 1e6:.0f}M GPU samples (issue 8 says 'about 48M': 1,000 x 8 x 7 days at "
          "10 s is ten times that)"
          + ("." if len(tele["telemetry_nodes"]) == NODES else
             "; --telemetry all generates it (hours on this machine)."), flush=True)

    User = get_user_model()
    staff = User.objects.get_or_create(username="bench-admin", defaults={"is_staff": True})[0]
    with connection.cursor() as cur:
        # The heaviest user (most jobs) and a typical one, for the scoped lists.
        cur.execute('SELECT "user", count(*) FROM jobs_job GROUP BY 1 ORDER BY 2 DESC')
        counts = cur.fetchall()
    heavy, typical = counts[0], counts[len(counts) // 2]
    researcher = User.objects.get_or_create(username=heavy[0])[0]
    deep = info["jobs"] // 50 // 20  # 1/20th of the way down
    cases = [
        ("jobs list, most wasted first, page 1", "/jobs/?ordering=-wasted", staff, 100),
        ("jobs list, most wasted first, page 100", "/jobs/?ordering=-wasted&page=100", staff,
         100),
        (f"jobs list, most wasted first, page {deep:,}", f"/jobs/?ordering=-wasted&page={deep}",
         staff, 100),
        (f"jobs list, user filter ({typical[1]:,} jobs), most wasted",
         f"/jobs/?user={typical[0]}&ordering=-wasted", staff, 100),
        (f"jobs list, researcher's own ({heavy[1]:,} jobs), most wasted",
         "/jobs/?ordering=-wasted", researcher, 100),
        ("jobs list, newest first (default)", "/jobs/", staff, 100),
        ("API jobs list, most wasted first (exact count; no target)",
         "/api/v1/jobs/?ordering=-wasted", staff, None),
        ("overview: heatmap + KPIs, 1,000 nodes", "/", staff, 150),
        ("job page: 64 GPUs (8 nodes), last 24 h", f"/jobs/{info['big_job']}/?range=24h",
         staff, 150),
        ("node page: 8 GPUs, last 24 h", f"/nodes/{NODES // 2}/?range=24h", staff, 150),
    ]
    from clusterui.api.models import ApiToken
    from clusterui.api.tokens import create_token

    # One throwaway token per run, revoked at the end (users have a token limit).
    token, key = create_token(staff, f"bench {time.time()}")
    try:
        missed = _time_cases(args, info, cases, staff, key)
        _time_worst_hour(args, info, staff, key)
        return missed
    finally:
        ApiToken.objects.filter(pk=token.pk).delete()


def unpack_last_hour(gpu_ids: list[int], hour: dt.datetime) -> int:
    """Move these GPUs' samples of ``hour`` from the packed tier back to the hot table."""
    import numpy as np
    from django.db import connection

    from clusterui.telemetry import packed
    from clusterui.telemetry.metrics import (
        GPU_CHUNK_TABLE,
        GPU_METRIC_NAMES,
        GPU_PACKED_ROLLUP_WIDTHS,
        GPU_ROLLUP_TABLES,
        GPU_SAMPLE_TABLE,
    )

    blocks = packed.raw_samples(gpu_ids, hour, hour + dt.timedelta(hours=1))
    kinds = gpu_copy_kinds()
    rows = 0
    with connection.cursor() as wrapper:
        cur = wrapper.cursor
        for gpu_id, b in blocks:
            packed.copy_arrays(cur, GPU_SAMPLE_TABLE, [
                ("ts", "timestamptz_ms", b.ts, None),
                ("gpu_id", "int4", np.full(len(b), gpu_id), None),
                ("job_id", "int4", b.job, b.job == 0),
                *[(m, kinds[m], b.values[m], b.nulls[m]) for m in GPU_METRIC_NAMES]])
            rows += len(b)
        cur.execute(f"DELETE FROM {GPU_CHUNK_TABLE} WHERE gpu_id = ANY(%s) AND start >= %s "
                    "AND start < %s", [gpu_ids, hour, hour + dt.timedelta(hours=1)])
        for width, table in GPU_ROLLUP_TABLES.items():
            col = "start" if width in GPU_PACKED_ROLLUP_WIDTHS else "bucket"  # blobs: per hour
            cur.execute(f"DELETE FROM {table} WHERE gpu_id = ANY(%s) AND {col} >= %s "
                        f"AND {col} < %s", [gpu_ids, hour, hour + dt.timedelta(hours=1)])
        cur.execute(f"ANALYZE {GPU_SAMPLE_TABLE}")
    return rows


def _time_worst_hour(args, info, staff, key) -> None:
    """The job page, node page and API metrics at the worst minute of the hour for reads:
    just before compaction packs the hour that has closed (``RAW_HOT_MINUTES`` past the
    hour), when the hot table holds that whole hour as well as the current one. In one
    transaction, rolled back at the end: the read GPUs' last closed hour goes back into
    the hot table as compaction found it (``unpack_last_hour``), and the cases are timed
    against that."""
    from django.db import transaction
    from django.test import Client

    from clusterui.jobs.models import JobGpu
    from clusterui.telemetry.compaction import floor_hour

    now = dt.datetime.fromtimestamp(info["now"], dt.UTC)
    hour = floor_hour(now) - dt.timedelta(hours=1)
    node = NODES // 2
    big = JobGpu.objects.filter(job_id=info["big_job"]).values_list("gpu_id", flat=True)
    gpus = sorted(set(big) | set(range((node - 1) * GPUS_PER_NODE + 1,
                                       node * GPUS_PER_NODE + 1)))
    window = (f"from={(now - dt.timedelta(hours=24)).isoformat()}&to={now.isoformat()}"
              .replace("+", "%2B"))
    cases = [
        ("job page: 64 GPUs (8 nodes), last 24 h", f"/jobs/{info['big_job']}/?range=24h", 0),
        ("node page: 8 GPUs, last 24 h", f"/nodes/{node}/?range=24h", 0),
        ("API metrics: 64 GPUs x 24 h, 4 GPU metrics",
         f"/api/v1/jobs/{info['big_job']}/metrics/?metrics=util_pct,sm_active_pct,power_w,"
         f"mem_used_mib&{window}", 1),
    ]
    cases = [c for c in cases if not args.only or any(o in c[0] for o in args.only)]
    if not cases:
        return
    web, api = Client(), Client()
    web.force_login(staff)
    with transaction.atomic():
        began = time.perf_counter()
        rows = unpack_last_hour(gpus, hour)
        print(f"\nThe worst minute of the hour for these reads ({settings_hot_minutes()} min past "
              f"it): {hour:%H:%M}-{hour + dt.timedelta(hours=1):%H:%M} UTC of the {len(gpus)} "
              f"read GPUs put back in the hot table ({rows:,} samples, "
              f"{time.perf_counter() - began:.1f} s, rolled back after), so it holds "
              f"{hour:%H:%M} to {now:%H:%M} for them:")
        print(f"{'case':<58} {'median':>8} {'p95':>8}")
        with data_clock(info["now"]):
            for name, path, is_api in cases:
                headers = {"authorization": f"Token {key}"} if is_api else {}
                times, _, _ = time_case(api if is_api else web, path, args.runs, **headers)
                print(f"{name:<58} {statistics.median(times):6.1f}ms "
                      f"{percentile(times, 0.95):6.1f}ms", flush=True)
        transaction.set_rollback(True)


def settings_hot_minutes() -> int:
    from django.conf import settings

    return settings.RAW_HOT_MINUTES


def _time_cases(args, info, cases, staff, key) -> int:
    from django.test import Client

    now = dt.datetime.fromtimestamp(info["now"], dt.UTC)
    window = (f"from={(now - dt.timedelta(hours=24)).isoformat()}&to={now.isoformat()}"
              .replace("+", "%2B"))
    api_cases = [
        ("API metrics: 64 GPUs x 24 h, 4 GPU metrics",
         f"/api/v1/jobs/{info['big_job']}/metrics/?metrics=util_pct,sm_active_pct,power_w,"
         f"mem_used_mib&{window}", 150),
    ]
    cases = [c for c in cases if not args.only or any(o in c[0] for o in args.only)]
    clients = {}
    print(f"\n{'case':<58} {'median':>8} {'p95':>8} {'target':>8} {'queries':>8} {'size':>8}")
    missed = 0
    with data_clock(info["now"]):
        for name, path, user, target in cases:
            client = clients.get(user.pk)
            if client is None:
                client = clients[user.pk] = Client()
                client.force_login(user)
            times, queries, size = time_case(client, path, args.runs)
            median = statistics.median(times)
            ok = target is None or median <= target
            missed += not ok
            verdict = ("      —" if target is None
                       else f"{'<=' if ok else 'MISS >'}{target:4d}ms")
            print(f"{name:<58} {median:6.1f}ms {percentile(times, 0.95):6.1f}ms "
                  f"{verdict} {queries:8d} {size / 1024:6.0f}KiB", flush=True)
        api = Client()
        for name, path, target in api_cases:
            if args.only and not any(o in name for o in args.only):
                continue
            times, queries, size = time_case(api, path, args.runs,
                                             authorization=f"Token {key}")
            median = statistics.median(times)
            ok = median <= target
            missed += not ok
            cases.append(name)
            print(f"{name:<58} {median:6.1f}ms {percentile(times, 0.95):6.1f}ms "
                  f"{'<=' if ok else 'MISS >'}{target:4d}ms {queries:8d} {size / 1024:6.0f}KiB",
                  flush=True)
    print(f"\n{len(cases) - missed} of {len(cases)} cases within target (median, {args.runs} runs "
          "after a warm-up; server time in-process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
