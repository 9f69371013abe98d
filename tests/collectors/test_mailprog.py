"""``clusterui-mailprog``, Slurm's MailProg, as slurmctld runs it: the console script of the
collector wheel installed alone (``login_node``, as for ``clusterui jobstats``), called as
``MailProg -s "<subject>" <user>`` with the job in its environment (SchedMD/slurm
src/slurmctld/agent.c ``_mail_proc``), against a live server holding a job stored through
the real ingest path and judged by the real detector pass (``test_jobstats._store``). The
"real mailer" is a script that records its arguments and standard input."""

import json
import socket
import subprocess
import sys
import textwrap

import pytest
from django.contrib.auth import get_user_model

from clusterui.api.tokens import create_token
from tests.collectors.test_jobstats import _node_env, _store, jobstats, login_node  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(300)]

SUBJECT = "Slurm Job_id=4242 Name=train Ended, Run time 00:20:00, COMPLETED, ExitCode 0"


@pytest.fixture
def controller(live_server, clean_samples, tmp_path):
    """The server with job 4242, a staff token in a file, a fake mailer and a config."""
    _store()
    robot = get_user_model().objects.create_user("slurm-mail", "", "pw", is_staff=True)
    _, key = create_token(robot, "slurmctld MailProg")
    token = tmp_path / "mailprog.token"
    token.write_text(key + "\n")
    token.chmod(0o600)
    mailer = tmp_path / "mail"
    mailer.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, sys
        with open({str(tmp_path / "sent.jsonl")!r}, "a") as f:
            f.write(json.dumps({{"argv": sys.argv[1:],
                                "stdin": sys.stdin.buffer.read().decode()}}) + "\\n")
        """))
    mailer.chmod(0o755)

    def configure(url=live_server.url, token_file=token):
        config = tmp_path / "mailprog.toml"
        config.write_text(f'url = "{url}"\ntoken_file = "{token_file}"\nmailer = "{mailer}"\n'
                          f'log_file = "{tmp_path / "mailprog.log"}"\ntimeout_s = 5\n')
        return config

    return tmp_path, configure, key, live_server.url


def mailprog(venv, tmp_path, config, mail_type, *, stdin=b"", job="4242"):
    env = _node_env()
    env.update({"CLUSTERUI_MAILPROG_CONFIG": str(config), "SLURM_JOB_ID": job,
                "SLURM_JOB_USER": "alice", "SLURM_CLUSTER_NAME": "hand",
                "SLURM_JOB_MAIL_TYPE": mail_type, "SLURM_JOB_STATE": "COMPLETED"})
    done = subprocess.run([str(venv / "bin" / "clusterui-mailprog"), "-s", SUBJECT,
                           "alice@example.org"], input=stdin, env=env, cwd=tmp_path,
                          capture_output=True, timeout=60)
    sent = [json.loads(line) for line in (tmp_path / "sent.jsonl").read_text().splitlines()]
    (tmp_path / "sent.jsonl").unlink()
    log = (tmp_path / "mailprog.log").read_text()
    return done, sent, log


def test_an_end_mail_carries_the_jobs_report(login_node, controller):  # noqa: F811
    tmp_path, configure, key, url = controller
    done, [mail], log = mailprog(login_node, tmp_path, configure(), "Ended")
    assert done.returncode == 0, done.stderr
    assert mail["argv"] == ["-s", SUBJECT, "alice@example.org"]  # as Slurm called us
    body = mail["stdin"]
    assert "-- ClusterUI: how the job used its GPUs --" in body
    # The job still runs in ClusterUI (its end not yet seen): the report says it is not final.
    assert "NOT FINAL: ClusterUI had not closed this job's books" in body
    assert "(running: refreshed every minute)" in body
    # The report is the one `clusterui jobstats 4242 --cluster hand --ascii` prints.
    printed = jobstats(login_node, tmp_path, "4242", "--cluster", "hand", "--ascii",
                       url=url, token=key)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout in body
    assert "Open job 4242: http://" in body
    assert "job 4242: report added to the Ended mail to alice@example.org" in log


def test_other_mails_and_failures_pass_slurms_mail_through_unchanged(
        login_node, controller):  # noqa: F811
    tmp_path, configure, _, _ = controller
    original = b"Slurm's own words\n"

    done, [mail], log = mailprog(login_node, tmp_path, configure(), "Began", stdin=original)
    assert done.returncode == 0 and mail["stdin"] == original.decode()
    assert mail["argv"] == ["-s", SUBJECT, "alice@example.org"]
    assert "a Began mail: no report" in log

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = configure(url=f"http://127.0.0.1:{port}")
    done, [mail], log = mailprog(login_node, tmp_path, down, "Ended", stdin=original)
    assert done.returncode == 0 and mail["stdin"] == original.decode()
    assert "sending Slurm's mail without the report" in log and f"127.0.0.1:{port}" in log

    no_token = configure(token_file=tmp_path / "missing.token")
    done, [mail], log = mailprog(login_node, tmp_path, no_token, "Ended")
    assert done.returncode == 0 and mail["stdin"] == ""
    assert "cannot read the token file" in log

    done, [mail], log = mailprog(login_node, tmp_path, configure(), "Ended", job="999999")
    assert done.returncode == 0 and mail["stdin"] == ""
    assert "no job '999999'" in log
