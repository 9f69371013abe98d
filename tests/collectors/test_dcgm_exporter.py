"""The dcgm-exporter GPU source: the text-format parser on the fixture pages, and the
collector's own sampling against a local HTTP server serving them (tests/data/dcgm-exporter)."""

import http.server
import logging
import math
import os
import threading

import pytest

from clusterui.ingest.validate import validate_batch
from collectors.agent import Agent
from collectors.config import Config, ConfigError
from collectors.gpu import exposition
from collectors.gpu.dcgm_exporter import hpc_job_id, job_hint
from tests.collectors.sysfs_trees import add_netdev, set_netdev_counters, write

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "dcgm-exporter")
GPU0 = "GPU-8a1f3c2e-5d4b-4f6a-9e7d-1c2b3a4d5e6f"
GPU1 = "GPU-2b7c9d0e-1f2a-4b3c-8d4e-5f6a7b8c9d0e"
T0 = 1763799980.0


def page(name: str) -> str:
    with open(os.path.join(DATA, name), encoding="utf-8") as fh:
        return fh.read()


# -- the parser ------------------------------------------------------------------------


def test_parses_a_fixture_page():
    parsed = exposition.parse(page("scrape-1.prom"))
    assert len(parsed.samples) == 48  # 24 fields x 2 GPUs
    assert parsed.types["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "counter"
    assert parsed.types["DCGM_FI_PROF_PCIE_TX_BYTES"] == "gauge"
    first = parsed.samples[0]
    assert first.name == "DCGM_FI_DEV_SM_CLOCK" and first.value == 1980.0
    assert first.labels == {
        "gpu": "0", "UUID": GPU0, "pci_bus_id": "00000000:18:00.0", "device": "nvidia0",
        "modelName": "NVIDIA H100 80GB HBM3", "hostname": "gpu-a017",
        "DCGM_FI_DRIVER_VERSION": "550.54.15", "hpc_job": "812345",
    }  # fmt: skip


def test_parser_reads_escapes_specials_and_timestamps():
    text = ('# HELP x a\n# TYPE x gauge\nx{a="q\\"uote",b="back\\\\slash",c="new\\nline",} '
            "+Inf 1763799980000\ny NaN\nz -1.5e3\n")
    samples = exposition.parse(text).samples
    assert samples[0].labels == {"a": 'q"uote', "b": "back\\slash", "c": "new\nline"}
    assert samples[0].value == math.inf
    assert math.isnan(samples[1].value)
    assert samples[2].value == -1500.0


@pytest.mark.parametrize("line, reason", [
    ('x{gpu="0', "unterminated label value"),
    ('x{gpu="0"', "expected , or }"),
    ('x{gpu="0"} ', "expected a value"),
    ('x{gpu="0"} 1_000', "bad value"),
    ('x{gpu="0"} inf', "bad value"),
    ('x{gpu=0} 1', 'expected ="'),
    ('x{gpu="0" uuid="a"} 1', "expected , or }"),
    ('x{gpu="0",gpu="1"} 1', "given twice"),
    ('x{gpu="\\q"} 1', "bad escape"),
    ("x 1 2 3", "expected a value"),
    ("x 1 12.5", "bad timestamp"),
    ("{gpu=\"0\"} 1", "no metric name"),
    ("# TYPE x", "malformed TYPE"),
])  # fmt: skip
def test_parser_refuses_malformed_lines_naming_them(line, reason):
    with pytest.raises(exposition.ExpositionError, match=f"line 2: .*{reason}"):
        exposition.parse("ok 1\n" + line + "\n")


def test_truncated_fixture_is_refused_whole():
    with pytest.raises(exposition.ExpositionError, match="unterminated label value"):
        exposition.parse(page("truncated.prom"))


def test_hpc_job_values():
    assert hpc_job_id("812345") == "812345"
    assert hpc_job_id("812345 1000") == "812345"  # ClusterUI's prolog line
    assert hpc_job_id("user=alice") is None
    assert hpc_job_id("# comment") is None
    assert hpc_job_id("  ") is None
    assert job_hint({"pod": "", "namespace": "", "container": ""}) is None
    hint = job_hint({"pod": "p", "namespace": "ns"})
    assert (hint.scheduler, hint.id, hint.meta) == ("kubernetes", "ns/p", {"name": "p"})


# -- the collector against a local exporter ------------------------------------------------


class Exporter:
    """A stdlib HTTP server in a thread that serves whatever ``page`` holds."""

    def __init__(self):
        self.page: str | None = None  # None: answer 503
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                if owner.page is None or self.path != "/metrics":
                    self.send_error(503 if owner.page is None else 404)
                    return
                body = owner.page.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/metrics"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def exporter():
    server = Exporter()
    yield server
    server.close()


class Clock:
    def __init__(self):
        self.t = T0

    def __call__(self):
        return self.t


class Messages(logging.Handler):
    """Log records, without pytest's logging plugin (the suite runs with -p no:logging)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture
def messages():
    handler = Messages()
    logger = logging.getLogger("collectors")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    yield handler.lines
    logger.removeHandler(handler)
    logger.setLevel(old)


def make_agent(roots, url):
    add_netdev(roots["sys"], "eth0", rx=1_000, tx=2_000)
    config = Config(cluster="example", node="gpu-a017", sysfs_root=roots["sys"],
                    procfs_root=roots["proc"], cgroup_root=roots["cgroup"],
                    job_map_dir=roots["jobmap"], interval=10, flush=10,
                    gpu_source="dcgm-exporter", dcgm_url=url)  # fmt: skip
    clock = Clock()
    return Agent(config, nvml=None, clock=clock), clock


def two_scrapes(agent, clock, roots, exporter, first, second):
    exporter.page = page(first)
    agent.sample()
    clock.t += 10
    set_netdev_counters(roots["sys"], "eth0", rx=1_000 + 50_000, tx=2_000 + 80_000)
    exporter.page = page(second) if second else None
    agent.sample()
    return agent.build_batch()


def nic_rates(batch) -> list[list]:
    """(ts, nic, rx, tx) of each NIC row: an Ethernet NIC's fabric fields are all null."""
    rows = batch["nic_samples"]["rows"]
    assert all(v is None for row in rows for v in row[4:])
    return [row[:4] for row in rows]


def rows_of(batch, uuid):
    index = next(g["index"] for g in batch["gpus"] if g["uuid"] == uuid)
    fields = batch["gpu_samples"]["fields"]
    return [dict(zip(fields, row, strict=True)) for row in batch["gpu_samples"]["rows"] if row[1] == index]


def accepted_whole(batch, now):
    checked = validate_batch(batch, now=now)
    assert not checked.rejected, dict(checked.rejected)
    assert len(checked.gpu_rows) == len(batch["gpu_samples"]["rows"])
    assert len(checked.nic_rows) == len(batch["nic_samples"]["rows"])
    return checked


def test_batch_from_two_scrapes(roots, exporter, messages):
    agent, clock = make_agent(roots, exporter.url)
    batch = two_scrapes(agent, clock, roots, exporter, "scrape-1.prom", "scrape-2.prom")

    assert batch["gpus"] == [
        {"uuid": GPU0, "index": 0, "model": "NVIDIA H100 80GB HBM3",
         "memory_total_mib": 18432 + 62588 + 539, "power_limit_w": None,
         "pci_bus_id": "00000000:18:00.0", "nvlink_bytes_per_s": None, "mig_enabled": None},
        {"uuid": GPU1, "index": 1, "model": "NVIDIA H100 80GB HBM3",
         "memory_total_mib": 81020 + 0 + 539, "power_limit_w": None,
         "pci_bus_id": "00000000:2A:00.0", "nvlink_bytes_per_s": None, "mig_enabled": None},
    ]  # fmt: skip
    first, second = rows_of(batch, GPU0)
    assert first["ts"] == T0 and second["ts"] == T0 + 10
    assert second == {
        "ts": T0 + 10, "gpu": 0, "job": "812345",
        "util_pct": 100.0, "mem_util_pct": 44.0, "mem_used_mib": 62588, "power_w": 687.5,
        "temp_c": 63.0, "sm_clock_mhz": 1980.0,
        "sm_active_pct": pytest.approx(91.25), "tensor_active_pct": pytest.approx(55.0),
        "dram_active_pct": pytest.approx(37.5),
        "pcie_tx_bytes_per_s": 2e9, "pcie_rx_bytes_per_s": 4e9,  # DCGM gives rates (B/s)
        "nvlink_tx_bytes_per_s": 1.2e11, "nvlink_rx_bytes_per_s": 1.18e11,
        "throttle_reasons": None,  # not in the exporter's counters: null, never 0
        "energy_j": pytest.approx((7_312_456_789 + 6_875_000) / 1000),  # mJ counter -> J
    }  # fmt: skip
    assert isinstance(second["mem_used_mib"], int)
    # the energy counter stays a counter (as from NVML): 687.5 W over the 10 s between scrapes
    assert second["energy_j"] - first["energy_j"] == pytest.approx(687.5 * 10)
    idle = rows_of(batch, GPU1)[1]
    assert idle["job"] is None
    assert idle["tensor_active_pct"] is None  # the fp64 blank sentinel: no value
    assert idle["util_pct"] == 0.0 and idle["sm_active_pct"] == 0.0  # real zeros stay zeros

    # NIC counters as usual: a rate from the two readings
    assert nic_rates(batch) == [[T0 + 10, 0, 5_000.0, 8_000.0]]
    # job attribution from hpc_job; the last XID went 0 -> 79 between the scrapes
    assert [(j["id"], j["scheduler"], j["gpus"]) for j in batch["jobs"]] == [("812345", "slurm", [0])]
    assert [(e["gpu"], e["kind"], e["code"]) for e in batch["events"]] == [(0, "xid", 79)]

    checked = accepted_whole(batch, now=clock.t + 1)
    assert checked.jobs["812345"]["scheduler"] == "slurm"
    assert [m for m in messages if not m.startswith("GPU readings from")] == []  # no trouble


def test_exporter_down_still_sends_nics(roots, exporter, messages):
    agent, clock = make_agent(roots, exporter.url)
    exporter.close()  # nothing listens there any more
    batch = two_scrapes(agent, clock, roots, exporter, "scrape-1.prom", None)
    assert batch["gpus"] == [] and batch["gpu_samples"]["rows"] == []
    assert nic_rates(batch) == [[T0 + 10, 0, 5_000.0, 8_000.0]]
    down = [m for m in messages if "not answering" in m]
    assert len(down) == 1, messages  # said once, not at every tick
    assert exporter.url in down[0]
    accepted_whole(batch, now=clock.t + 1)


def test_http_error_then_recovery(roots, exporter, messages):
    agent, clock = make_agent(roots, exporter.url)
    batch = two_scrapes(agent, clock, roots, exporter, "scrape-1.prom", None)  # 503 second
    assert len(batch["gpu_samples"]["rows"]) == 2  # the first scrape's two GPUs
    assert any("HTTP 503" in m for m in messages), messages
    clock.t += 10
    exporter.page = page("scrape-2.prom")
    agent.sample()
    assert len(agent.build_batch()["gpu_samples"]["rows"]) == 2
    assert any("answers again" in m for m in messages)


def test_malformed_page_keeps_nics_and_next_page_works(roots, exporter, messages):
    agent, clock = make_agent(roots, exporter.url)
    batch = two_scrapes(agent, clock, roots, exporter, "scrape-1.prom", "truncated.prom")
    assert [row[0] for row in batch["gpu_samples"]["rows"]] == [T0, T0]  # first scrape only
    assert nic_rates(batch) == [[T0 + 10, 0, 5_000.0, 8_000.0]]
    bad = [m for m in messages if "malformed page" in m]
    assert len(bad) == 1 and "line " in bad[0], messages
    accepted_whole(batch, now=clock.t + 1)


def test_gpu_missing_from_the_page(roots, exporter, messages):
    agent, clock = make_agent(roots, exporter.url)
    batch = two_scrapes(agent, clock, roots, exporter, "scrape-1.prom",
                        "scrape-2-gpu1-missing.prom")  # fmt: skip
    assert [g["uuid"] for g in batch["gpus"]] == [GPU0, GPU1]
    assert rows_of(batch, GPU0)[1]["util_pct"] == 100.0
    missing = rows_of(batch, GPU1)[1]
    assert all(missing[name] is None for name in list(missing)[3:])  # all null, not zeros
    assert any(GPU1 in m and "missing from the page" in m for m in messages), messages
    accepted_whole(batch, now=clock.t + 1)


def test_page_without_gpu_series(roots, exporter, messages):
    agent, clock = make_agent(roots, exporter.url)
    exporter.page = "# HELP node_load1 1m load average.\n# TYPE node_load1 gauge\nnode_load1 0.5\n"
    agent.sample()
    batch = agent.build_batch()
    assert batch["gpus"] == []
    assert any("no GPU series" in m for m in messages), messages


def test_mapping_file_wins_over_hpc_job(roots, exporter):
    # The prolog's file for GPU 0 names another job than the exporter's label.
    write(os.path.join(roots["jobmap"], GPU0), "900001 1000\nuser=bob\n")
    agent, clock = make_agent(roots, exporter.url)
    batch = two_scrapes(agent, clock, roots, exporter, "scrape-1.prom", "scrape-2.prom")
    assert {r["job"] for r in rows_of(batch, GPU0)} == {"900001"}
    assert [(j["id"], j["user"]) for j in batch["jobs"]] == [("900001", "bob")]
    accepted_whole(batch, now=clock.t + 1)


def test_hpc_job_from_clusterui_prolog_files(roots, exporter):
    agent, clock = make_agent(roots, exporter.url)
    batch = two_scrapes(agent, clock, roots, exporter, "hpc-job-prolog-file.prom",
                        "hpc-job-prolog-file.prom")  # fmt: skip
    assert {r["job"] for r in rows_of(batch, GPU0)} == {"812345"}
    assert len(rows_of(batch, GPU0)) == 2  # three copies of each series, one row per scrape
    accepted_whole(batch, now=clock.t + 1)


def test_kubernetes_pod_labels(roots, exporter):
    agent, clock = make_agent(roots, exporter.url)
    batch = two_scrapes(agent, clock, roots, exporter, "kubernetes.prom", "kubernetes.prom")
    uid = "0f3c5a7e-9b1d-4e2f-8a6c-2d4b6f8a0c1e"
    assert {r["job"] for r in rows_of(batch, GPU0)} == {uid}
    assert {r["job"] for r in rows_of(batch, GPU1)} == {None}
    assert [(j["id"], j["scheduler"], j["name"]) for j in batch["jobs"]] == [
        (uid, "kubernetes", "llama-ft-0")]
    accepted_whole(batch, now=clock.t + 1)


# -- settings -------------------------------------------------------------------------------


def test_settings_file_env_and_command_line(tmp_path):
    path = tmp_path / "collector.toml"
    path.write_text('gpu_source = "dcgm-exporter"\ndcgm_url = "http://10.0.0.1:9400/metrics"\n')
    config = Config.load(str(path), {})
    assert (config.gpu_source, config.dcgm_url) == ("dcgm-exporter", "http://10.0.0.1:9400/metrics")
    config = Config.load(str(path), {"CLUSTERUI_GPU_SOURCE": "nvml"},
                         {"dcgm_url": "https://exporter:9400/metrics"})  # fmt: skip
    assert (config.gpu_source, config.dcgm_url) == ("nvml", "https://exporter:9400/metrics")
    assert Config.load(None, {}).gpu_source == "nvml"
    with pytest.raises(ConfigError, match="dcgm_url"):
        Config.load(None, {"CLUSTERUI_DCGM_URL": "127.0.0.1:9400"})
    with pytest.raises(ConfigError, match="gpu_source"):
        Config.load(None, {"CLUSTERUI_GPU_SOURCE": "dcgm"})
    with pytest.raises(ConfigError, match="gpu_source"):
        Config.load(None, {"CLUSTERUI_GPU_SOURCE": "dcgm-exporter", "CLUSTERUI_NVML": "sim"})
