"""Collector settings: a TOML file, then ``CLUSTERUI_<KEY>`` environment variables.

Every value is checked here, once; a bad one raises ``ConfigError`` naming the key, so the
collector stops at start-up instead of sampling with a setting nobody asked for.
"""

from __future__ import annotations

import dataclasses
import re
import socket
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from collectors import signing

ENV_PREFIX = "CLUSTERUI_"
NVML_MODES = ("auto", "nvml", "sim", "none")
# Where GPU readings come from: NVML (the default) or a dcgm-exporter's /metrics page.
GPU_SOURCES = ("nvml", "dcgm-exporter")
# What the sender can reach (redis-py URLs): the broker is the Redis that Celery uses.
BROKER_SCHEMES = ("redis", "rediss", "unix")


class ConfigError(ValueError):
    """A missing or bad setting; the message starts with the key's name."""


@dataclass(frozen=True)
class Config:
    cluster: str = "default"
    node: str = dataclasses.field(default_factory=socket.gethostname)
    broker_url: str = "redis://127.0.0.1:6379/0"
    queue: str = "ingest"
    interval: float = 10.0
    flush: float = 10.0
    spool_dir: str = "/var/spool/clusterui-collector"
    spool_max_bytes: int = 268435456
    nvml: str = "auto"
    gpu_source: str = "nvml"
    dcgm_url: str = "http://127.0.0.1:9400/metrics"
    sysfs_root: str = "/sys"
    procfs_root: str = "/proc"
    cgroup_root: str = "/sys/fs/cgroup"
    job_map_dir: str = "/run/clusterui-jobs"
    sim_seed: int = 1
    # Kubernetes: the kubelet's pod-resources socket (each GPU's pod, idle ones included;
    # needs the kubernetes extra: grpcio), and optionally the kubelet's /pods for the pods'
    # UIDs and owners (https://NODE:10250/pods with a token that may get nodes/proxy).
    # Empty: not used.
    kubelet_socket: str = ""
    kubelet_pods_url: str = ""
    kubelet_token_file: str = ""
    kubelet_ca_file: str = ""
    # The pod label (or annotation) that names the person a pod runs for, as the platform
    # sets it (read from the kubelet's /pods): its value becomes the job's user, so the
    # job is theirs on the pages and in the alert emails. Empty: Kubernetes jobs have no
    # user (their namespace stands for the account).
    kubelet_user_label: str = ""
    # The node's ingest key, as ``manage.py ingest_key derive CLUSTER NODE`` prints it
    # (``cuin1.…``: signs this node's batches only), or, while the server still allows it,
    # the cluster secret itself. Batches are signed with it (HMAC-SHA256) when set.
    ingest_key_id: str = ""
    ingest_key: str = ""
    ingest_key_file: str = ""

    @classmethod
    def load(cls, path: str | None, env: Mapping[str, str],
             overrides: Mapping[str, Any] | None = None) -> Config:
        """Read ``path`` (TOML, optional), then ``CLUSTERUI_*`` from ``env``, then
        ``overrides`` (command-line options); the later wins."""
        raw: dict[str, Any] = {}
        if path:
            raw.update(_read_toml(path))
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ConfigError(f"{unknown[0]}: unknown setting (in {path})")
        for name in known:
            value = env.get(ENV_PREFIX + name.upper())
            if value is not None:
                raw[name] = value
        raw.update(overrides or {})
        values = {name: _PARSERS[name](name, value) for name, value in raw.items()}
        config = cls(**values)
        config._check()
        return config

    def _check(self) -> None:
        if self.flush < self.interval:
            raise ConfigError(f"flush: must be >= interval ({self.interval:g}), got {self.flush!r}")
        if (self.ingest_key or self.ingest_key_file) and not self.ingest_key_id:
            raise ConfigError("ingest_key_id: must be set when ingest_key or ingest_key_file is")
        if self.gpu_source == "dcgm-exporter" and self.nvml == "sim":
            raise ConfigError("gpu_source: 'dcgm-exporter' reads a real exporter; the simulator "
                              "(nvml = 'sim') needs gpu_source = 'nvml'")
        if self.ingest_key and self.ingest_key_file:
            raise ConfigError("ingest_key: set ingest_key or ingest_key_file, not both")
        if self.kubelet_pods_url and not self.kubelet_socket:
            raise ConfigError("kubelet_pods_url: describes the pods kubelet_socket names; "
                              "set kubelet_socket too")
        if self.kubelet_user_label and not self.kubelet_pods_url:
            raise ConfigError("kubelet_user_label: is read from the kubelet's /pods; set "
                              "kubelet_pods_url too")

    def signing_key(self) -> tuple[str, str] | None:
        """(key id, secret) to sign batches with, or None when batches go unsigned."""
        if not self.ingest_key_id:
            return None
        secret = self.ingest_key
        if self.ingest_key_file:
            try:
                with open(self.ingest_key_file, encoding="utf-8") as fh:
                    secret = fh.read().strip()
            except OSError as exc:
                raise ConfigError(f"ingest_key_file: cannot read {self.ingest_key_file!r}: "
                                  f"{exc.strerror}") from exc
        if not secret:
            raise ConfigError("ingest_key: empty; set ingest_key or ingest_key_file")
        if signing.is_node_key(secret) and not signing.well_formed_node_key(secret):
            raise ConfigError(f"ingest_key: not a whole node key ({signing.NODE_KEY_PREFIX} "
                              "and 43 base64url characters); copy it again from "
                              "manage.py ingest_key derive")
        return self.ingest_key_id, secret


def _read_toml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ConfigError(f"config file: cannot read {path!r}: {exc.strerror}") from exc
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file: {path!r} is not valid TOML: {exc}") from exc
    # Allow either top-level keys or a [collector] table.
    table = doc.pop("collector", None)
    if isinstance(table, dict):
        doc.update(table)
    return doc


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name}: must be a non-empty string, got {value!r}")
    return value.strip()


def _optional_text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name}: must be a string, got {value!r}")
    return value.strip()


def _number(low: float, high: float | None):
    def parse(name: str, value: Any) -> float:
        bad = isinstance(value, bool)
        try:
            number = float(value)
        except (TypeError, ValueError):
            bad = True
        if bad or number != number or number < low or (high is not None and number > high):
            limit = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
            raise ConfigError(f"{name}: must be a number {limit}, got {value!r}")
        return number

    return parse


def _integer(low: int):
    def parse(name: str, value: Any) -> int:
        if isinstance(value, bool) or isinstance(value, float):
            number = None
        else:
            try:
                number = int(str(value).strip())
            except ValueError:
                number = None
        if number is None or number < low:
            raise ConfigError(f"{name}: must be an integer >= {low}, got {value!r}")
        return number

    return parse


def _nvml_mode(name: str, value: Any) -> str:
    if not isinstance(value, str) or value.strip().lower() not in NVML_MODES:
        raise ConfigError(f"{name}: must be one of {', '.join(NVML_MODES)}, got {value!r}")
    return value.strip().lower()


def _gpu_source(name: str, value: Any) -> str:
    if not isinstance(value, str) or value.strip().lower() not in GPU_SOURCES:
        raise ConfigError(f"{name}: must be one of {', '.join(GPU_SOURCES)}, got {value!r}")
    return value.strip().lower()


def _http_url(name: str, value: Any) -> str:
    text = _text(name, value)
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest:
        raise ConfigError(f"{name}: must be an http:// or https:// URL like "
                          f"http://127.0.0.1:9400/metrics, got {value!r}")
    return text


# A label (or annotation) key: an optional DNS-subdomain prefix and "/", then a name of at
# most 63 characters, alphanumeric at both ends with "-", "_" and "." between (Kubernetes
# docs, "Labels and Selectors", Syntax and character set).
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")


def _label_key(name: str, value: Any) -> str:
    text = _text(name, value)
    prefix, slash, label = text.rpartition("/")
    if not (_LABEL_NAME.fullmatch(label) and (
            not slash or (len(prefix) <= 253 and _DNS_SUBDOMAIN.fullmatch(prefix)))):
        raise ConfigError(f"{name}: must be a Kubernetes label key like "
                          f"example.org/user or user, got {value!r}")
    return text


def _broker(name: str, value: Any) -> str:
    text = _text(name, value)
    if "://" not in text:
        raise ConfigError(f"{name}: must be a URL like redis://host:6379/0, got {value!r}")
    scheme = text.split("://", 1)[0].lower()
    if scheme not in BROKER_SCHEMES:
        raise ConfigError(f"{name}: the collector speaks Redis only (redis://, rediss:// or "
                          f"unix://), got {scheme}://")
    return text


_PARSERS = {
    "cluster": _text,
    "node": _text,
    "broker_url": _broker,
    "queue": _text,
    "interval": _number(1, 3600),
    "flush": _number(1, None),
    "spool_dir": _text,
    "spool_max_bytes": _integer(1),
    "nvml": _nvml_mode,
    "gpu_source": _gpu_source,
    "dcgm_url": _http_url,
    "sysfs_root": _text,
    "procfs_root": _text,
    "cgroup_root": _text,
    "job_map_dir": _text,
    "ingest_key_id": _optional_text,
    "ingest_key": _optional_text,
    "ingest_key_file": _optional_text,
    "sim_seed": _integer(0),
    "kubelet_socket": _optional_text,
    "kubelet_pods_url": lambda name, value: _http_url(name, value) if value else "",
    "kubelet_token_file": _optional_text,
    "kubelet_ca_file": _optional_text,
    "kubelet_user_label": lambda name, value: _label_key(name, value) if value else "",
}
