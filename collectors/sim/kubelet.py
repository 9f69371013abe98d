"""The kubelet of a simulated Kubernetes node: which pod holds each GPU, as the real
collector's ``PodMap`` (collectors/attribution/podmap.py) would learn it from the
pod-resources API and /pods, answered from the simulator's own schedule.

Simulated, and sent from simulated nodes only (the batch says ``simulated``): the
namespace is the job's account, the owner a Job (``<name>``), or a StatefulSet for an
interactive notebook (the IDLE scenario: ``jupyter``, ``vscode-tunnel``...), the pod named
as those controllers name them (``<job>-<5 characters>``, ``<set>-0``), the UID the job's
id (the one its cgroup path carries, node.py), the start (``status.startTime``) the job's,
and the user the job's: each pod carries its user in the label a site names with
``kubelet_user_label`` (JupyterHub's KubeSpawner labels its pods
``hub.jupyter.org/username``), as a site that set it would see.
"""

from __future__ import annotations

from collectors.attribution.kubelet import PodRef
from collectors.sim.node import SimJob, SimNode
from collectors.sim.scenarios import Scenario


def pod_of(job: SimJob) -> PodRef:
    if job.scenario is Scenario.IDLE:
        kind, pod = "StatefulSet", f"{job.name}-0"
    else:
        kind, pod = "Job", f"{job.name}-{job.id.replace('-', '')[:5]}"
    return PodRef(job.account, pod, uid=job.id, owner_kind=kind, owner_name=job.name,
                  user=job.user, start_time=float(job.start))


class SimKubelet:
    """``of_gpus`` as ``PodMap`` answers it, for one simulated node."""

    def __init__(self, node: SimNode) -> None:
        self.node = node

    def of_gpus(self, gpus: list[str], mig_parents=None) -> dict[str, PodRef]:
        out = {}
        for placement in self.node.active_placements():
            if placement.job.scheduler != "kubernetes":
                continue
            for gpu in placement.gpus:
                uuid = self.node.uuid(gpu)
                if uuid in gpus:
                    out[uuid] = pod_of(placement.job)
        return out

    def close(self) -> None:
        pass
