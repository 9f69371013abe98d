"""Validation of a batch's optional ``gpu_health`` section: a header and rows like the
sample sections. A bad row is refused on its own (counted under its reason); a batch
without the section (an older collector) is valid."""

from clusterui.gpuhealth.fields import COUNT_MAX, COUNTS, FIELDS, FLAGS

MAX_ROWS = 10_000


def _flag(value):
    if value is None or isinstance(value, bool):
        return value, None
    return None, f"must be true, false or null, got {type(value).__name__}"


def validate_health(batch, section, window) -> list[tuple]:
    """``[(ts, gpu index, *FIELDS)]``, the newest row of each GPU; faults on ``batch``."""
    from clusterui.ingest.validate import _index, _optional_number, _show, _timestamp

    if section is None:
        return []
    if not isinstance(section, dict) or not isinstance(section.get("fields"), list) \
            or not isinstance(section.get("rows"), list):
        batch.reject("gpu_health: must be an object with fields and rows", _show(section))
        return []
    header = section["fields"]
    if "ts" not in header or "gpu" not in header:
        batch.reject("gpu_health: fields must name ts and gpu", _show(header))
        return []
    at = {name: i for i, name in enumerate(header) if isinstance(name, str)}
    rows = section["rows"]
    if len(rows) > MAX_ROWS:
        batch.reject(f"gpu_health: more than {MAX_ROWS} rows; the rest were ignored",
                     str(len(rows)))
        rows = rows[:MAX_ROWS]
    newest: dict[int, tuple] = {}
    for k, row in enumerate(rows):
        where = f"row {k}"
        if not isinstance(row, list) or len(row) != len(header):
            batch.reject("gpu_health: row length differs from fields", where)
            continue
        ts, err = _timestamp(row[at["ts"]], window)
        if err:
            batch.reject(f"gpu_health: {err}", where)
            continue
        gpu, err = _index(row[at["gpu"]], batch.gpus)
        if err:
            batch.reject(f"gpu_health: gpu {err}", where)
            continue
        values, bad = [], None
        for name in FIELDS:
            raw = row[at[name]] if name in at else None
            if name in FLAGS:
                value, err = _flag(raw)
            else:
                value, err = _optional_number(raw, 0, COUNT_MAX, integer=True)
            if err:
                bad = (f"gpu_health: {name} {err}", f"{where}: {_show(raw)}")
                break
            values.append(value)
        if bad:
            batch.reject(*bad)
            continue
        if gpu not in newest or ts > newest[gpu][0]:
            newest[gpu] = (ts, gpu, *values)
    return list(newest.values())


__all__ = ["validate_health", "COUNTS", "FLAGS"]
