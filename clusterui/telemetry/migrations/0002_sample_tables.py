"""The raw sample tables: narrow rows, range-partitioned by day on ts.

Django cannot declare partitioned tables, so they are plain SQL. There is no primary key and
no foreign key: idempotency is per batch (the ingest log), and a per-row key would make a
redelivered COPY fail forever. Partitions are created by ``clusterui.telemetry.partitions``.
"""

from django.db import migrations

GPU = """
CREATE TABLE telemetry_gpusample (
    ts timestamptz NOT NULL,
    energy_j double precision,
    throttle_reasons bigint,
    gpu_id integer NOT NULL,
    job_id integer,
    util_pct real,
    mem_util_pct real,
    mem_used_mib integer,
    power_w real,
    temp_c real,
    sm_clock_mhz real,
    sm_active_pct real,
    tensor_active_pct real,
    dram_active_pct real,
    pcie_tx_bytes_per_s real,
    pcie_rx_bytes_per_s real,
    nvlink_tx_bytes_per_s real,
    nvlink_rx_bytes_per_s real
) PARTITION BY RANGE (ts);
-- Node and job charts read one GPU's series over a time range.
CREATE INDEX telemetry_gpusample_gpu_ts ON telemetry_gpusample (gpu_id, ts);
COMMENT ON INDEX telemetry_gpusample_gpu_ts IS
    'node/job charts and detectors: one GPU''s samples over a time range';
"""

NIC = """
CREATE TABLE telemetry_nicsample (
    ts timestamptz NOT NULL,
    rx_bytes_per_s double precision,
    tx_bytes_per_s double precision,
    nic_id integer NOT NULL
) PARTITION BY RANGE (ts);
CREATE INDEX telemetry_nicsample_nic_ts ON telemetry_nicsample (nic_id, ts);
COMMENT ON INDEX telemetry_nicsample_nic_ts IS
    'node/job network charts and the communication-bound detector: one NIC over a range';
"""

JOB = """
CREATE TABLE telemetry_jobsample (
    ts timestamptz NOT NULL,
    host_mem_used_bytes bigint,
    job_id integer NOT NULL,
    node_id integer NOT NULL,
    cpu_cores_used real
) PARTITION BY RANGE (ts);
CREATE INDEX telemetry_jobsample_job_ts ON telemetry_jobsample (job_id, ts);
COMMENT ON INDEX telemetry_jobsample_job_ts IS
    'job page and the input-bound detector: a job''s host CPU and memory over a range';
"""

DROP = """
DROP TABLE IF EXISTS telemetry_gpusample;
DROP TABLE IF EXISTS telemetry_nicsample;
DROP TABLE IF EXISTS telemetry_jobsample;
"""


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0001_initial")]

    operations = [migrations.RunSQL(GPU + NIC + JOB, DROP)]
