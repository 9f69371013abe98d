"""Every page's and API list's query parameters fed values nobody should send: each answers
with a page or a 4xx naming the problem, never a server error.

Values of the kinds that broke pages before: a well-formed but impossible time (Django's
``parse_datetime`` raises on hour 25 instead of returning None), a time far outside what
datetime arithmetic keeps clear of overflow, a NUL (PostgreSQL's text refuses it), numbers
past int64 and float64, and the text-direction override."""

import pytest
from django.utils import timezone

from clusterui.fabric.models import PortLink
from tests import rows as f

pytestmark = pytest.mark.django_db

VALUES = ["2026-02-30T10:00", "2026-11-22T25:00", "0001-01-01T00:30+01:00", "\x00",
          "99999999999999999999", "1e309", "-1", "\u202e" + "x" * 2000]


@pytest.fixture
def cast():
    n = f.node("gpu-a001", gpus=2)
    gpus = list(n.gpus.order_by("index"))
    job = f.job("alice", gpus=gpus)
    f.finding(job)
    # An InfiniBand port reporting fabric health: the fabric page lists it and its error
    # history answers (a port without it is a 404 before any parameter is read).
    PortLink.objects.create(nic=n.nics.get(), ts=timezone.now(), link_state=4, phys_state=5,
                            link_width=4, link_gbps=400.0, nominal_gbps=400.0)
    return n, gpus[0], job


def pages(n, gpu, job) -> dict[str, tuple[str, ...]]:
    when = ("range", "from", "to")
    return {
        "/": ("metric", "cluster", *when),
        "/nodes/": ("q", "state", "health", "ordering", "page", "cluster"),
        "/nodes/history/": ("metric", "cluster", *when),
        f"/nodes/{n.pk}/": when,
        f"/gpus/{gpu.pk}/": when,
        "/fabric/": ("q", "kind", "show", "sort", "page", "cluster"),
        "/jobs/": ("q", "user", "account", "state", "finding", "active_after",
                   "active_before", "ordering", "page", "format"),
        f"/jobs/{job.pk}/": when,
        "/jobs/compare/": ("job",),
        "/users/": ("group", "cluster", "page", "format", *when),
        "/namespaces/": when,
        "/trends/": ("by", "period", "metric", "cluster"),
        "/findings/": ("state", "severity", "kind", "acknowledged", "user", "node", "ordering",
                       "page", "format"),
        "/api/v1/jobs/": ("user", "state", "cluster", "ordering", "page", "page_size",
                          "active_after", "active_before"),
        "/api/v1/nodes/": ("cluster", "name", "simulated", "page"),
        "/api/v1/findings/": ("kind", "severity", "state", "ordering", "page"),
        "/api/v1/usage/": ("group", "from", "to", "limit", "cluster"),
        f"/api/v1/gpus/{gpu.pk}/metrics/": ("metrics", "from", "to", "step", "agg"),
        f"/api/v1/jobs/{job.pk}/metrics/": ("metrics", "from", "to", "step", "agg"),
        f"/api/v1/nics/{n.nics.get().pk}/metrics/": ("metrics", "from", "to", "step", "agg"),
        f"/api/v1/nics/{n.nics.get().pk}/errors/": ("from", "to", "step"),
    }


def test_no_parameter_value_makes_a_server_error(client_for, cast):
    client = client_for("staff")
    errors = []
    for url, params in pages(*cast).items():
        for param in params:
            for value in VALUES:
                status = client.get(url, {param: value}).status_code
                if status >= 500:
                    errors.append((url, param, value[:24], status))
    assert errors == []


def test_job_links_by_scheduler_id_refuse_odd_parts_with_a_404(client_for, cast):
    client = client_for("staff")
    for path in ("/jobs/slurm/test/%00/", "/jobs/slurm/%00/1/", "/jobs/%00/test/1/",
                 "/jobs/slurm/test/" + "9" * 3000 + "/"):
        assert client.get(path).status_code == 404, path[:40]
