"""The scenario matrix end to end: 34 labelled cases at 1, 2, 10, 30 and 60 s sampling,
delivered live, as a backlog after the jobs stopped, out of order and with a two-hour spool
replay in the middle of a live stream, sent as signed batches over the real broker to the
real bulk consumer, judged by the real detector pass that Celery beat runs in a real worker,
and read back through the JSON API of a running server (``manage.py scenario_report
--through-queue``, as an operator runs it).

The server runs with its silence rules shortened (a node is silent after 10 s without a
batch, a job ends 30 s after its last one) so that the spool replay's outage, which must
outlast them in real time, takes seconds; every detector threshold is the default.
"""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from clusterui.api.tokens import create_token
from clusterui.findings.matrix.cases import CASES
from clusterui.findings.matrix.client import Server
from clusterui.findings.matrix.generate import RATES, RUN_S, SHAPES

SILENCE = {"NODE_SILENT_AFTER_S": "10", "JOB_STALE_AFTER_S": "30"}
BEAT = {"BEAT_DETECTORS_S": "2", "BEAT_STALE_JOBS_S": "2", "BEAT_COMPACT_S": "60",
        # No mail server in this test: the alert tasks are not what it is about.
        "BEAT_ALERTS_S": "86400", "BEAT_DIGEST_S": "86400", "BEAT_SILENT_NODES_S": "86400"}
SECRET = "matrix-cluster-secret-0123456789"


@pytest.mark.slow
def test_the_matrix_through_the_queue_meets_its_floor(make_worker, broker_url, live_server,
                                                      tmp_path, capsys):
    staff = get_user_model().objects.create_user("operator", password="x", is_staff=True)
    _, token = create_token(staff, "scenario matrix")
    call_command("ingest_key", "ensure", "scenario-matrix", "--key-id", "matrix-1",
                 "--secret", SECRET)
    (tmp_path / "token").write_text(token)
    (tmp_path / "secret").write_text(SECRET)
    make_worker(kind="bulk", extra_env=SILENCE)
    make_worker(queues="default", beat=True, extra_env={**SILENCE, **BEAT})

    call_command("scenario_report", "--through-queue", "--url", live_server.url,
                 "--token-file", str(tmp_path / "token"), "--broker", broker_url,
                 "--key-id", "matrix-1", "--secret-file", str(tmp_path / "secret"),
                 "--stale-after", "30", "--timeout", "900", "--fail")
    out = capsys.readouterr().out
    print(out)  # the report, shown with -s or when an assertion below fails
    jobs = len(CASES) * len(RATES) * len(SHAPES)
    assert f"{jobs} of {jobs} jobs classified correctly." in out, out
    assert "WRONG" not in out and "NODE FINDING" not in out and "OUT OF ORDER" not in out
    for shape in SHAPES:
        for rate in RATES:
            assert f"  {shape:<13} {rate:>3}s  " in out  # every cell of the table printed

    # A 40-minute backlog sent after its job stopped reporting is judged on all of it.
    server = Server(url=live_server.url, token=token, broker_url=broker_url,
                    key_id="matrix-1", cluster_secret=SECRET)
    try:
        backlog = [j for j in server.get("jobs/", limit=1000, q="-bl")["results"]
                   if j["name"] in ("low-util", "idle-gpus", "comm-fabric")]
        assert len(backlog) == 3 * len(RATES)
        for job in backlog:
            detail = server.get(f"jobs/{job['id']}/")
            rate = int(job["external_id"].split("-bl")[1].split("-")[0])
            samples = {u: g["samples"] for u, g in detail["efficiency"]["per_gpu"].items()}
            assert samples and set(samples.values()) == {RUN_S // rate}, (job, samples)
            assert detail["efficiency"]["finalized_at"]
            assert {f["kind"] for f in detail["findings"]}, job  # each is a positive case
    finally:
        server.close()
