"""The packed tier and the rollups: plain SQL, partitioned like the raw tables.

- ``telemetry_gpuchunk``: one row per GPU per clock hour, the hour's samples packed by
  ``clusterui.telemetry.codec`` (already compressed, so TOAST stores it as it is). Day
  partitions on ``start``; retention drops them with the raw ones (``RAW_RETENTION_DAYS``).
- ``telemetry_gpurollup1m`` / ``1h``: per GPU and bucket, the sample count and avg/max/min
  of every gauge, bit_or of the throttle reasons, min, max and last of the energy counter. The
  1-minute rows are split by job (``job_id`` 0 = no job) so the job rollups are exact.
- ``telemetry_jobrollup1m`` / ``1h``: per job and bucket, aggregated over the job's GPUs.

1-minute tables have day partitions, 1-hour tables month partitions (on ``bucket``); all are
written by compaction (``clusterui.telemetry.packed``) and created by ``partitions.py``.
"""

from django.db import migrations

# Frozen here: the gauges as they were when this migration was written.
GAUGES = (
    ("util_pct", "real"), ("mem_util_pct", "real"), ("mem_used_mib", "integer"),
    ("power_w", "real"), ("temp_c", "real"), ("sm_clock_mhz", "real"),
    ("sm_active_pct", "real"), ("tensor_active_pct", "real"), ("dram_active_pct", "real"),
    ("pcie_tx_bytes_per_s", "real"), ("pcie_rx_bytes_per_s", "real"),
    ("nvlink_tx_bytes_per_s", "real"), ("nvlink_rx_bytes_per_s", "real"),
)


def _gauge_columns() -> str:
    cols = []
    for name, sql_type in GAUGES:
        cols.append(f"{name}_avg real")
        cols.append(f"{name}_max {sql_type}")
        cols.append(f"{name}_min {sql_type}")
    return ",\n    ".join(cols)


CHUNK = """
CREATE TABLE telemetry_gpuchunk (
    start timestamptz NOT NULL,
    gpu_id integer NOT NULL,
    n integer NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT telemetry_gpuchunk_pkey PRIMARY KEY (gpu_id, start)
) PARTITION BY RANGE (start);
-- The blob is compressed by the codec: TOAST must not try again.
ALTER TABLE telemetry_gpuchunk ALTER COLUMN data SET STORAGE EXTERNAL;
COMMENT ON INDEX telemetry_gpuchunk_pkey IS
    'one chunk per GPU and hour (compaction upserts it); series reads one GPU over a range';
"""

GPU_ROLLUP = """
CREATE TABLE telemetry_gpurollup{suffix} (
    bucket timestamptz NOT NULL,
    energy_j_min double precision,
    energy_j_max double precision,
    energy_j_last double precision,
    throttle_reasons_or bigint,
    gpu_id integer NOT NULL,
    {job}
    n integer NOT NULL,
    {gauges},
    CONSTRAINT telemetry_gpurollup{suffix}_pkey PRIMARY KEY ({key})
) PARTITION BY RANGE (bucket);
COMMENT ON INDEX telemetry_gpurollup{suffix}_pkey IS
    'series reads one GPU over a range; compaction replaces a (GPU, hour)''s rows';
"""

JOB_ROLLUP = """
CREATE TABLE telemetry_jobrollup{suffix} (
    bucket timestamptz NOT NULL,
    job_id integer NOT NULL,
    gpus integer NOT NULL,
    samples integer NOT NULL,
    gpu_s real NOT NULL,
    util_pct real,
    sm_active_pct real,
    busy_pct real,
    power_w real,
    mem_used_max_mib integer,
    CONSTRAINT telemetry_jobrollup{suffix}_pkey PRIMARY KEY (job_id, bucket)
) PARTITION BY RANGE (bucket);
COMMENT ON INDEX telemetry_jobrollup{suffix}_pkey IS
    'a job''s usage over a range (job pages, lists); compaction recomputes a (job, hour)';
"""

SQL = (
    CHUNK
    + GPU_ROLLUP.format(suffix="1m", job="job_id integer NOT NULL,", gauges=_gauge_columns(),
                        key="gpu_id, bucket, job_id")
    + GPU_ROLLUP.format(suffix="1h", job="", gauges=_gauge_columns(), key="gpu_id, bucket")
    + JOB_ROLLUP.format(suffix="1m")
    + JOB_ROLLUP.format(suffix="1h")
)

DROP = """
DROP TABLE IF EXISTS telemetry_gpuchunk;
DROP TABLE IF EXISTS telemetry_gpurollup1m;
DROP TABLE IF EXISTS telemetry_gpurollup1h;
DROP TABLE IF EXISTS telemetry_jobrollup1m;
DROP TABLE IF EXISTS telemetry_jobrollup1h;
"""


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0002_sample_tables")]

    operations = [migrations.RunSQL(SQL, DROP)]
