"""docker-compose.yml read as Compose reads it, for running its services without Docker.

``service_env(name)`` is the environment Compose gives a service: ``.env`` (here
``.env.example``) as ``env_file``, then ``environment``, with ``${VAR}``, ``${VAR:-default}``
and ``${VAR:?message}`` interpolated from ``.env`` as Compose does for the file itself, and
``$$`` as a literal ``$``. ``Stack`` maps what Docker would provide to this machine:
``/run/secrets/NAME`` to files under a temporary directory, the hosts ``postgres`` and
``redis`` to services running here, ``/tmp/`` paths to the test's own directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.services import ROOT

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_]\w*)")


def dotenv(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def interpolate(value, env: dict[str, str]):
    """Compose's interpolation of one value (strings inside lists and maps too)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3)
        current = env.get(name)
        if op in (":-", "-"):
            return current if current not in (None, "") or (op == "-" and current == "") \
                else arg
        if op in (":?", "?"):
            if current in (None, ""):
                raise ValueError(f"{name}: {arg}")
            return current
        return current or ""

    return _VAR.sub(one, value)


@dataclass
class Compose:
    path: Path = ROOT / "docker-compose.yml"
    env_path: Path = ROOT / ".env.example"
    doc: dict = field(init=False)
    dotenv: dict = field(init=False)

    def __post_init__(self):
        self.dotenv = dotenv(self.env_path)
        self.doc = interpolate(yaml.safe_load(self.path.read_text()), self.dotenv)

    def service(self, name: str) -> dict:
        return self.doc["services"][name]

    def service_env(self, name: str) -> dict[str, str]:
        svc = self.service(name)
        env = {}
        if svc.get("env_file"):
            env.update(self.dotenv)
        environment = svc.get("environment") or {}
        if isinstance(environment, list):
            environment = dict(item.split("=", 1) for item in environment)
        env.update({k: "" if v is None else str(v) for k, v in environment.items()})
        return env

    def secrets(self, name: str) -> list[str]:
        return [s if isinstance(s, str) else s["source"]
                for s in self.service(name).get("secrets", [])]
