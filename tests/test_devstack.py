"""The demo's supervision (scripts/devstack.py): a child that exits is restarted with
backoff and the console says so; the others keep running; stopping stops them all.
Real subprocesses, bounded to about ten seconds."""

import importlib.util
import os
import signal
import sys
import time

from tests.services import ROOT, wait_for


def load_devstack(tmp_path):
    spec = importlib.util.spec_from_file_location("devstack_under_test",
                                                  ROOT / "scripts" / "devstack.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.VAR = tmp_path
    module.RESTART_BACKOFF_S = 0.5  # the series: 0.5, 1, 2 ... s
    return module


def test_a_child_that_dies_is_restarted_with_backoff_and_the_rest_keep_running(tmp_path,
                                                                                capsys):
    devstack = load_devstack(tmp_path)
    starts = tmp_path / "starts"
    # "ingest" counts its starts and dies at once (exit code 3) three times, then stays up.
    flaky = [sys.executable, "-c",
             f"import sys, time\nf = open({str(starts)!r}, 'a'); f.write('x'); f.close()\n"
             f"n = len(open({str(starts)!r}).read())\n"
             "if n <= 3: sys.exit(3)\n"
             "time.sleep(600)"]
    steady = [sys.executable, "-c", "import time; time.sleep(600)"]
    env = dict(os.environ)
    devstack.spawn("ingest", flaky, env)
    web = devstack.spawn("web", steady, env)
    began = time.monotonic()
    try:
        def four_starts():
            devstack.supervise_once()
            return starts.exists() and len(starts.read_text()) == 4
        wait_for(four_starts, timeout=30, interval=0.1, what="the fourth start of ingest")
        elapsed = time.monotonic() - began
        for _ in range(10):  # it stays up now: no further restart
            devstack.supervise_once()
            time.sleep(0.1)
        assert len(starts.read_text()) == 4
        assert web.poll() is None and web in devstack.children  # never touched
        out = capsys.readouterr().out
        for delay in ("0", "1", "2"):  # 0.5 s shows as 0
            assert f"[clusterui] ingest exited with code 3; restarting in {delay} s" in out
        assert out.count("[clusterui] ingest restarted") == 3
        # The backoff adds up: 0.5 + 1 + 2 s at least between the first and fourth start.
        assert elapsed >= 3.5
        # SIGKILL shows as a negative code, and the child is restarted the same way.
        (ingest,) = [p for p in devstack.children if p.name == "ingest"]
        os.kill(ingest.pid, signal.SIGKILL)
        wait_for(lambda: (devstack.supervise_once(), bool(devstack.restarts))[1], timeout=10,
                 what="the killed child to be noticed")
        assert "ingest exited with code -9; restarting in" in capsys.readouterr().out
    finally:
        running = list(devstack.children)
        devstack.stop_children()  # what Ctrl-C does
    assert all(p.poll() is not None for p in running)
    assert devstack.children == [] and devstack.restarts == []
    devstack.supervise_once()  # stopped: nothing is restarted any more
    assert devstack.children == []


def test_a_child_given_as_a_function_gets_its_argv_anew_at_each_restart(tmp_path, capsys):
    """The demo's simulator is restarted with what is stored by then (``--after``,
    ``--first-job-id`` from ``manage.py sim_resume``), not the argv of its first start; an
    argv that cannot be made now is tried again later."""
    devstack = load_devstack(tmp_path)
    seen = tmp_path / "argv"
    calls = []

    def argv():
        calls.append(len(calls))
        if len(calls) == 2:
            raise OSError("the database is not answering")
        return [sys.executable, "-c",
                f"import sys; open({str(seen)!r}, 'a').write(sys.argv[1] + ' ')"
                + ("; import time; time.sleep(600)" if len(calls) > 2 else ""),
                f"start-{len(calls)}"]

    env = dict(os.environ)
    devstack.spawn("simcluster", argv, env)
    try:
        wait_for(lambda: (devstack.supervise_once(), seen.exists()
                          and seen.read_text().split() == ["start-1", "start-3"])[1],
                 timeout=30, interval=0.1, what="the third argv to start")
        out = capsys.readouterr().out
        assert "simcluster could not be restarted (the database is not answering)" in out
        assert out.count("[clusterui] simcluster restarted") == 1
    finally:
        devstack.stop_children()
