"""A small, strict reader of the Prometheus text exposition format (version 0.0.4).

Enough for a ``/metrics`` page of dcgm-exporter: ``# HELP`` / ``# TYPE`` comments and
``name{label="value",...} value [timestamp]`` lines. Anything else is an error naming the
line, so a truncated or garbled page is refused whole rather than half-read. The collector
does not depend on prometheus-client.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_SPECIAL = {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}


class ExpositionError(ValueError):
    """The page is not in the text format; the message names the line."""


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass
class Page:
    samples: list[Sample]
    types: dict[str, str]  # metric name -> counter | gauge | ... (from # TYPE)


def parse(text: str) -> Page:
    samples: list[Sample] = []
    types: dict[str, str] = {}
    for number, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        try:
            if line.lstrip().startswith("#"):
                _comment(line.lstrip(), types)
            else:
                samples.append(_sample(line))
        except ExpositionError as exc:
            raise ExpositionError(f"line {number}: {exc}: {line[:120]!r}") from None
    return Page(samples, types)


def _comment(line: str, types: dict[str, str]) -> None:
    parts = line[1:].split(None, 3)
    if len(parts) >= 2 and parts[0] == "TYPE":
        if len(parts) != 3 or not _NAME.fullmatch(parts[1]):
            raise ExpositionError("malformed TYPE line")
        types[parts[1]] = parts[2]
    # HELP and any other comment: nothing to keep


def _sample(line: str) -> Sample:
    match = _NAME.match(line)
    if match is None:
        raise ExpositionError("no metric name")
    name, pos = match.group(), match.end()
    labels: dict[str, str] = {}
    if pos < len(line) and line[pos] == "{":
        labels, pos = _labels(line, pos + 1)
    rest = line[pos:].split()
    if not rest or len(rest) > 2 or not line[pos : pos + 1].isspace():
        raise ExpositionError("expected a value (and an optional timestamp)")
    value = _value(rest[0])
    if len(rest) == 2 and not re.fullmatch(r"-?\d+", rest[1]):
        raise ExpositionError(f"bad timestamp {rest[1]!r}")
    return Sample(name, labels, value)


def _labels(line: str, pos: int) -> tuple[dict[str, str], int]:
    labels: dict[str, str] = {}
    while True:
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if pos < len(line) and line[pos] == "}":
            return labels, pos + 1
        match = _LABEL.match(line, pos)
        if match is None:
            raise ExpositionError("bad label name")
        key = match.group()
        pos = match.end()
        if line[pos : pos + 2] != '="':
            raise ExpositionError(f"label {key}: expected =\"")
        value, pos = _quoted(line, pos + 2)
        if key in labels:
            raise ExpositionError(f"label {key} given twice")
        labels[key] = value
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if pos < len(line) and line[pos] == ",":
            pos += 1
        elif pos < len(line) and line[pos] == "}":
            return labels, pos + 1
        else:
            raise ExpositionError("expected , or } after a label")


def _quoted(line: str, pos: int) -> tuple[str, int]:
    out = []
    while pos < len(line):
        char = line[pos]
        if char == '"':
            return "".join(out), pos + 1
        if char == "\\":
            escaped = _ESCAPES.get(line[pos + 1 : pos + 2])
            if escaped is None:
                raise ExpositionError("bad escape in a label value")
            out.append(escaped)
            pos += 2
            continue
        out.append(char)
        pos += 1
    raise ExpositionError("unterminated label value")


def _value(text: str) -> float:
    if text in _SPECIAL:
        return _SPECIAL[text]
    if not _NUMBER.fullmatch(text):
        raise ExpositionError(f"bad value {text!r}")
    return float(text)
