"""``/jobs/<scheduler>/<cluster>/<job id>/``: a job found by the scheduler's own job id, for
links from other sites (Open OnDemand's active jobs, a Slurm e-mail, a ticket), which know
that id and not ClusterUI's. Redirects to the job's page; a 404 otherwise that does not tell
a job the viewer may not see from one that does not exist."""

from django.db.models import F
from django.shortcuts import redirect, render

from clusterui.inventory.models import Cluster
from clusterui.jobs.choices import Scheduler
from clusterui.jobs.models import Job


def _not_found(request, text: str):
    return render(request, "web/job_not_found.html", {"text": text}, status=404)


def job_by_scheduler_id(request, scheduler, cluster, jobid):
    """The newest job the viewer may see with this (scheduler, cluster, job id).

    ``job_identity_uniq`` makes that one row at most today; "newest" (latest start, then the
    latest first seen) is the rule should that ever change, as it would for a scheduler that
    re-uses ids: a link then goes to the job running now, not to one from years ago."""
    if scheduler not in Scheduler.values:
        return _not_found(request, f"ClusterUI knows no scheduler {scheduler!r}: the first "
                                   f"part of this address is one of "
                                   f"{', '.join(Scheduler.values)}.")
    if "\x00" in cluster or "\x00" in jobid:
        # No name holds one (PostgreSQL's text cannot), and a query with one is an error.
        return _not_found(request, "A cluster name or job id has no NUL character: this "
                                   "address is not one ClusterUI or a scheduler wrote.")
    if not Cluster.objects.filter(name=cluster).exists():
        known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none yet"
        return _not_found(request, f"ClusterUI knows no cluster {cluster!r} (its clusters: "
                                   f"{known}). The address takes the cluster's name as its "
                                   "collectors report it.")
    job = (Job.objects.visible_to(request.user)
           .filter(scheduler=scheduler, cluster__name=cluster, external_id=jobid)
           .order_by(F("started_at").desc(nulls_last=True), "-first_seen", "-id")
           .only("pk").first())
    if job is None:
        # The same words whether the job does not exist or is someone else's.
        return _not_found(request, f"No {scheduler} job {jobid} on {cluster} that you may "
                                   "see: ClusterUI has not seen it (a job without GPUs is "
                                   "never reported), or it is another user's (a job is "
                                   "shown to its owner and to staff).")
    return redirect("job-detail", pk=job.pk)
