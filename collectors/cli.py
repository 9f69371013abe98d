"""``clusterui-collector``: sample every ``interval``, ship every ``flush``.

``--once --stdout`` takes two samples a second apart (so rates exist) and prints one batch
as JSON instead of sending it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time

from collectors.agent import Agent
from collectors.backend import open_backend
from collectors.config import Config, ConfigError

log = logging.getLogger("collectors")

ONCE_GAP_S = 1.0


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="clusterui-collector", description=__doc__)
    parser.add_argument("--config", metavar="FILE", help="TOML settings file")
    parser.add_argument("--once", action="store_true", help="build one batch and exit")
    parser.add_argument("--stdout", action="store_true", help="with --once: print, don't send")
    parser.add_argument("--gpu-source", choices=("nvml", "dcgm-exporter"),
                        help="where GPU readings come from (default: the config's gpu_source, nvml)")
    parser.add_argument("--dcgm-url", metavar="URL",
                        help="with --gpu-source dcgm-exporter: the exporter's /metrics "
                        "(default http://127.0.0.1:9400/metrics)")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (default INFO)")
    args = parser.parse_args(argv)
    if args.stdout and not args.once:
        parser.error("--stdout needs --once")
    return args


def main(argv=None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = Config.load(args.config, os.environ, _overrides(args))
        backend = open_backend(config)
    except ConfigError as exc:
        print(f"clusterui-collector: configuration error: {exc}", file=sys.stderr)
        return 2
    config = backend.config or config
    agent = Agent(config, nvml=backend.nvml, nvml_reason=backend.reason,
                  ethtool=backend.ethtool)
    try:
        if args.once and args.stdout:
            return _once_stdout(agent, backend)
        shipper = _shipper(config)
        if shipper is None:
            return 2
        if args.once:
            return _once_ship(agent, backend, shipper)
        return _run_forever(agent, backend, shipper, config)
    finally:
        agent.close()


def _overrides(args) -> dict:
    """Command-line settings, which win over the file and the environment."""
    out = {"gpu_source": args.gpu_source, "dcgm_url": args.dcgm_url}
    return {k: v for k, v in out.items() if v is not None}


def _sample(agent: Agent, backend) -> None:
    if backend.sim_node is not None:
        backend.sim_node.advance(agent.clock())
    agent.sample()


def _once_stdout(agent: Agent, backend) -> int:
    _sample(agent, backend)
    time.sleep(ONCE_GAP_S)
    _sample(agent, backend)
    json.dump(agent.build_batch(), sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()
    return 0


def _shipper(config: Config):
    from collectors.transport import RedisSender, Shipper, Spool

    try:
        spool = Spool(config.spool_dir, config.spool_max_bytes)
        sender = RedisSender(config.broker_url, config.queue, config.signing_key())
    except (OSError, ValueError) as exc:  # ConfigError is a ValueError
        print(f"clusterui-collector: configuration error: {exc}", file=sys.stderr)
        return None
    return Shipper(sender, spool)


def _once_ship(agent: Agent, backend, shipper) -> int:
    _sample(agent, backend)
    time.sleep(ONCE_GAP_S)
    _sample(agent, backend)
    shipper.ship(agent.build_batch())
    return 0


def _run_forever(agent: Agent, backend, shipper, config: Config) -> int:
    stop = threading.Event()

    def on_signal(signum, _frame):
        log.info("signal %d: final flush, then exit", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info(
        "collecting on %s every %gs, shipping every %gs to %s (queue %s)",
        config.node, config.interval, config.flush, _redact(config.broker_url), config.queue,
    )  # fmt: skip
    next_sample = time.monotonic()
    next_flush = next_sample + config.flush
    while not stop.is_set():
        if stop.wait(max(0.0, next_sample - time.monotonic())):
            break
        try:
            _sample(agent, backend)
        except Exception:  # noqa: BLE001 - one bad tick must not stop the collector
            log.exception("sampling failed")
        now = time.monotonic()
        next_sample += config.interval
        if next_sample < now:  # fell behind (suspend, slow I/O): skip, don't burst
            next_sample = now + config.interval
        if now >= next_flush:
            shipper.ship(agent.build_batch())
            next_flush = now + config.flush
    shipper.ship(agent.build_batch())
    return 0


def _redact(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.split("@", 1)[1]
    return scheme + sep + rest


if __name__ == "__main__":
    sys.exit(main())
