"""A version-2 batch's JSON text decoded with its sample rows typed and bounded in C.

Validating a section row by row in Python, or column by column with builtins
(``validate._clean_rows``), costs more than decoding it: a 1,000-row GPU section took about
0.6 ms to decode and 1.8 ms to check. msgspec decodes a section's rows straight into
tuples of the types the section's fields call for (the time a number, the reference an
integer, or a text for a job, the job a text or null, each metric null or a number of its
kind within the metric's bounds), refusing anything else while it decodes, in the same time
as an untyped decode. Rows that pass are handed to validation as ``TypedRows``: what the
decoder checked is not checked again (``validate._clean_rows``).

Nothing else changes: any section whose rows do not all pass (a bool, a string, a value out
of bounds, a NaN or an integer beyond 64 bits, an unusual field list) is decoded as before
by ``messages.loads``, and validation finds exactly which rows are wrong and why; so is
every other member of the envelope, and the whole text when it is not a JSON object.
(``tests/ingest/test_typed_decode.py`` compares the two decodings' validated batches over
clean and hostile sections.) The version-1 and unsigned paths, whose envelope arrives
already decoded with the queue message, are unchanged.
"""

from typing import Annotated, Any, Optional

import msgspec

from clusterui.fabric.metrics import FABRIC_METRICS
from clusterui.telemetry.metrics import GPU_METRICS, JOB_METRICS, NIC_METRICS

_INT64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
# section: (its reference field, the reference's type, whether rows carry a job, metrics),
# as ``validate.validate_batch`` reads them.
SECTIONS = {
    "gpu_samples": ("gpu", _INT64, True, GPU_METRICS),
    "nic_samples": ("nic", _INT64, False, NIC_METRICS + FABRIC_METRICS),
    "job_samples": ("job", str, False, JOB_METRICS),
}
# A longer field list is judged by validation alone, never typed nor remembered (validation's
# layout cache keeps the same limit).
MAX_FIELDS = 256
# Below this many bytes of text, the typed decoding's fixed cost (a call per member) eats
# what it saves: a node-sized batch of 8 GPU rows (3 kB) took as long either way, 24 rows
# (7 kB) a quarter less time typed (measured, decoding and validating together).
TYPED_FROM_BYTES = 4096
_UNSET = msgspec.UNSET


class _Section(msgspec.Struct, forbid_unknown_fields=True):
    """A sample section, its members kept as their JSON text."""

    fields: msgspec.Raw | msgspec.UnsetType = _UNSET
    rows: msgspec.Raw | msgspec.UnsetType = _UNSET


class _Envelope(msgspec.Struct, forbid_unknown_fields=True):
    """The members of contract 1's envelope (``docs/protocol.md``) as their JSON text, the
    sample sections one level further. One scan of the text finds them all; a member this
    server does not know, or a section that is not an object, fails it (``decode`` then
    reads the text as before)."""

    schema: msgspec.Raw | msgspec.UnsetType = _UNSET
    cluster: msgspec.Raw | msgspec.UnsetType = _UNSET
    node: msgspec.Raw | msgspec.UnsetType = _UNSET
    agent: msgspec.Raw | msgspec.UnsetType = _UNSET
    sent_at: msgspec.Raw | msgspec.UnsetType = _UNSET
    interval_s: msgspec.Raw | msgspec.UnsetType = _UNSET
    gpus: msgspec.Raw | msgspec.UnsetType = _UNSET
    nics: msgspec.Raw | msgspec.UnsetType = _UNSET
    jobs: msgspec.Raw | msgspec.UnsetType = _UNSET
    gpu_samples: _Section | msgspec.UnsetType = _UNSET
    nic_samples: _Section | msgspec.UnsetType = _UNSET
    job_samples: _Section | msgspec.UnsetType = _UNSET
    events: msgspec.Raw | msgspec.UnsetType = _UNSET
    gpu_health: msgspec.Raw | msgspec.UnsetType = _UNSET


_ENVELOPE = msgspec.json.Decoder(_Envelope)
_MEMBERS = _Envelope.__struct_fields__


class TypedRows(list):
    """A section's rows as its typed decoder returned them (``_decoder``): each a tuple of
    the section's width, the time a float, the reference an int (a str for jobs), the job
    None or a str, each known metric None or a number of its kind within its bounds."""

    __slots__ = ()


def _row_type(section: str, fields: tuple[str, ...]):
    ref_field, ref_type, with_job, metrics = SECTIONS[section]
    by_name = {m.name: m for m in metrics}
    types: list = []
    for name in fields:
        metric = by_name.get(name)
        if name == "ts":
            types.append(float)  # an integer too, as a float; the window is validation's
        elif name == ref_field:
            types.append(ref_type)  # an int beyond int64 fails it: ``loads`` reads it as
            # a float (orjson), and validation says so, as it always did
        elif name == "job" and with_job:
            types.append(Optional[str])  # noqa: UP045 - a runtime type for msgspec
        elif metric is not None:
            kind = int if metric.integer else float
            types.append(Optional[Annotated[kind, msgspec.Meta(ge=metric.lo,  # noqa: UP045
                                                               le=metric.hi)]])
        else:
            types.append(Any)  # a field this server does not know: ignored by validation
    return list[tuple[tuple(types)]]


_DECODERS: dict[tuple, msgspec.json.Decoder | None] = {}


def _decoder(section: str, fields) -> msgspec.json.Decoder | None:
    """The typed decoder of these fields' rows; None for a field list validation refuses
    (not names, no time or reference, a name twice, too long)."""
    if (type(fields) is not list or not 0 < len(fields) <= MAX_FIELDS
            or not all(type(f) is str for f in fields)):
        return None
    key = (section, *fields)
    if key in _DECODERS:
        return _DECODERS[key]
    ref_field = SECTIONS[section][0]
    usable = ("ts" in fields and ref_field in fields and len(set(fields)) == len(fields))
    if len(_DECODERS) >= 1000:
        _DECODERS.clear()
    found = _DECODERS[key] = (msgspec.json.Decoder(_row_type(section, tuple(fields)))
                              if usable else None)
    return found


def decode(text: str | bytes, loads):
    """The envelope in ``text`` as ``loads`` (``messages.loads``) reads it, its sample
    sections' rows as ``TypedRows`` where every row passes their typed decoder."""
    if len(text) < TYPED_FROM_BYTES:
        return loads(text)
    try:
        members = _ENVELOPE.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeError, RecursionError):
        # Not a JSON object, a member or section that is unusual, nesting deeper than
        # msgspec follows (about 1,000 levels, where the plain parsers go further): read as
        # before.
        return loads(text)
    out = {}
    try:
        for name in _MEMBERS:
            value = getattr(members, name)
            if value is _UNSET:
                continue
            out[name] = (_section(name, value, loads) if name in SECTIONS
                         else loads(memoryview(value)))
    except ValueError:
        # A member ``loads`` cannot read although msgspec could: the whole text, as before,
        # so that the reason given is the one it always was.
        return loads(text)
    return out


def _section(name: str, section: _Section, loads) -> dict:
    out = {}
    if section.fields is not _UNSET:
        out["fields"] = loads(memoryview(section.fields))
    if section.rows is _UNSET:
        return out
    decoder = _decoder(name, out.get("fields"))
    if decoder is not None:
        try:
            out["rows"] = TypedRows(decoder.decode(section.rows))
            return out
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            pass  # some row is unusual: validation finds which, and why
    out["rows"] = loads(memoryview(section.rows))
    return out
