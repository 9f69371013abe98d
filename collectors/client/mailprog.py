"""``clusterui-mailprog``: Slurm's ``MailProg`` that adds the job's ClusterUI report to the
mails of ``--mail-type=END`` (and ``FAIL``, and ``ALL``, which holds both).

slurmctld runs ``MailProg -s "<subject>" <mail-user>`` with standard input ``/dev/null`` and
the job in its environment (``SLURM_JOB_ID``, ``SLURM_JOB_USER``, ``SLURM_CLUSTER_NAME``,
``SLURM_JOB_MAIL_TYPE`` "Began", "Ended", "Failed", ...), and kills it after 120 s
(SchedMD/slurm ``src/slurmctld/agent.c``: ``_mail_proc``, ``_build_mail_env``,
``MAIL_PROG_TIMEOUT``; ``doc/man/man5/slurm.conf.5``: MailProg). This program hands the same
arguments to the real mailer (``/usr/bin/mail`` by default), the message being what it was
given on standard input followed, for an end mail, by the job's report from the ClusterUI
API (``clusterui jobstats``'s, over the same client).

A MailProg must never lose the user's mail: whatever goes wrong on the way to the report (no
configuration, no token, the server down or slow, the job unknown), Slurm's mail is sent
unchanged and the reason logged. At END time ClusterUI may not have finalized the job (its
last samples are still on their way, the detector pass runs every minute): the report then
has the figures so far and says so at its top; ``wait_final_s`` waits for the final ones.

Configuration: a TOML file, ``/etc/clusterui/mailprog.toml`` (``$CLUSTERUI_MAILPROG_CONFIG``
names another; slurmctld passes MailProg no environment of its own, so the file is the
way), keys in ``DEFAULTS``. It logs to ``log_file`` if set, else to syslog (``/dev/log``),
and to standard error, which slurmctld logs (at debug level: MailProg exits 0).
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from collectors.client import jobstats
from collectors.client.api import Client

CONFIG = "/etc/clusterui/mailprog.toml"
DEFAULTS = {
    "url": "",  # the ClusterUI server, e.g. https://clusterui.example.org
    "token_file": "/etc/clusterui/mailprog.token",  # an API token of a staff account
    "mailer": "/usr/bin/mail",  # the real mail command, called as Slurm called us
    "cluster": "",  # the cluster's name in ClusterUI (default: $SLURM_CLUSTER_NAME)
    "timeout_s": 10.0,  # per API request
    "wait_final_s": 0.0,  # wait this long for ClusterUI to finalize the job (at most 90)
    "ascii": True,  # ASCII sparklines: mail(1) on some systems mangles UTF-8 blocks
    "log_file": "",
}
END_TYPES = {"Ended", "Failed"}  # agent.c _mail_type_str: MAIL_JOB_END, MAIL_JOB_FAIL
MAX_WAIT_S = 90.0  # slurmctld kills MailProg after 120 s: leave room to send
POLL_S = 5.0
MAILER_TIMEOUT_S = 20.0

log = logging.getLogger("clusterui.mailprog")


class Skip(Exception):
    """No report for this mail (not an error: a BEGIN mail, say)."""


def load_config(env) -> dict:
    path = Path(env.get("CLUSTERUI_MAILPROG_CONFIG") or CONFIG)
    with path.open("rb") as f:
        given = tomllib.load(f)
    unknown = set(given) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"{path}: unknown keys {', '.join(sorted(unknown))}")
    return {**DEFAULTS, **given}


def setup_logging(config: dict) -> None:
    log.setLevel(logging.INFO)
    log.propagate = False
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(logging.Formatter("clusterui-mailprog: %(message)s"))
    log.addHandler(stream)
    try:
        if config.get("log_file"):
            handler = logging.FileHandler(config["log_file"], encoding="utf-8")
            handler.setFormatter(logging.Formatter(
                "%(asctime)s clusterui-mailprog[%(process)d] %(levelname)s %(message)s"))
        elif os.path.exists("/dev/log"):
            handler = logging.handlers.SysLogHandler("/dev/log")
            handler.setFormatter(logging.Formatter("clusterui-mailprog[%(process)d]: %(message)s"))
        else:
            return
    except OSError as exc:
        log.warning("cannot open the log %s: %s", config.get("log_file"), exc)
        return
    log.addHandler(handler)


def _token(config: dict) -> str:
    path = Path(config["token_file"])
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise RuntimeError(f"cannot read the token file {path}: {exc.strerror}") from None
    if not token:
        raise RuntimeError(f"the token file {path} is empty")
    return token


def _subject(argv: list[str]) -> str:
    return argv[argv.index("-s") + 1] if "-s" in argv[:-1] else ""


def report_text(config: dict, env, argv: list[str]) -> str:
    """What to add to an end mail: the job's report, marked when it is not final."""
    mail_type = env.get("SLURM_JOB_MAIL_TYPE", "")
    job_id = env.get("SLURM_JOB_ID", "")
    if mail_type not in END_TYPES:
        raise Skip(f"a {mail_type or 'mail of no SLURM_JOB_MAIL_TYPE'} mail: no report")
    if not job_id:
        raise RuntimeError("no SLURM_JOB_ID in the environment")
    if _subject(argv).startswith("Slurm Array Summary"):
        raise Skip("an array's summary mail: each task has its own report")
    if not config["url"]:
        raise RuntimeError("no url in the configuration")
    client = Client(config["url"], _token(config), timeout=float(config["timeout_s"]))
    cluster = config["cluster"] or env.get("SLURM_CLUSTER_NAME") or None
    report = jobstats.collect(client, job_id, cluster=cluster, scheduler="slurm")
    deadline = time.monotonic() + min(MAX_WAIT_S, float(config["wait_final_s"]))
    while report["job"]["finalized_at"] is None and time.monotonic() + POLL_S < deadline:
        time.sleep(POLL_S)
        report = jobstats.collect(client, job_id, cluster=cluster, scheduler="slurm")
    job = report["job"]
    link = f"{config['url'].rstrip('/')}/jobs/{job['id']}/"
    head = ["", "-- ClusterUI: how the job used its GPUs --"]
    if job["finalized_at"] is None:
        head.append(
            "NOT FINAL: ClusterUI had not closed this job's books when Slurm sent this mail "
            "(its last samples may still be on their way). These are the figures so far; the "
            f"final report, a few minutes after the job's end: {link} or "
            f"`clusterui jobstats {job_id}`.")
    text = jobstats.render(report, ascii_only=bool(config["ascii"]))
    return "\n".join(head) + "\n" + text + f"Open job {job_id}: {link}\n"


def send(mailer: str, argv: list[str], body: bytes, original: bytes) -> int:
    """Run the mailer with Slurm's arguments; if it refuses the message with the report,
    try Slurm's own once more."""
    for attempt in ([body, original] if body != original else [original]):
        try:
            done = subprocess.run([mailer, *argv], input=attempt, capture_output=True,
                                  timeout=MAILER_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            log.error("cannot run the mailer %s: %s", mailer, exc)
            code = 1
            continue
        code = done.returncode
        if code == 0:
            return 0
        log.error("the mailer %s exited %d: %s", mailer, code,
                  done.stderr.decode("utf-8", "replace").strip()[-500:])
    return code


def main(argv=None, env=None, stdin=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if env is None else env
    if stdin is None:
        stdin = b"" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read()
    config = dict(DEFAULTS)
    problem = None
    try:
        config = load_config(env)
    except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:
        problem = f"no usable configuration ({exc})"
    setup_logging(config)
    job = env.get("SLURM_JOB_ID", "?")
    body = stdin
    try:
        if problem:
            raise RuntimeError(problem)
        text = report_text(config, env, argv)
        body = stdin + (b"\n" if stdin and not stdin.endswith(b"\n") else b"") \
            + text.encode("utf-8")
        log.info("job %s: report added to the %s mail to %s", job,
                 env.get("SLURM_JOB_MAIL_TYPE"), argv[-1] if argv else "?")
    except Skip as exc:
        log.info("job %s: %s", job, exc)
    except Exception as exc:  # noqa: BLE001 - anything: Slurm's mail goes out regardless
        log.warning("job %s: sending Slurm's mail without the report: %s", job, exc)
    return send(config["mailer"] or DEFAULTS["mailer"], argv, body, stdin)


if __name__ == "__main__":
    sys.exit(main())
