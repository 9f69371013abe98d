"""Each GPU's pod on a Kubernetes node: the kubelet's allocations (``kubelet.py``) joined to
the GPUs NVML lists, with the pod's UID and owner where the kubelet's /pods says them
(``pods.py``).

The device plugin names a GPU by its UUID (kubelet.py), as NVML does. A MIG device's id is
its ``MIG-...`` UUID, the UUID NVML gives the instance's handle: the collector sends each
MIG instance as a GPU of its own (collectors/gpu/mig.py), so an instance listed in ``gpus``
is attributed to the pod that holds it. Where a caller lists only whole GPUs, it may say
which GPU each MIG device is on (``mig_parents``, {MIG UUID: GPU UUID}) and the GPU goes to
the pod that holds every allocated MIG device of it; a GPU whose MIG devices several pods
share is left unattributed then.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from collectors.attribution.kubelet import Allocations, PodRef, PodResources
from collectors.attribution.pods import KubeletPods

log = logging.getLogger(__name__)


def gpu_pods(allocs: Allocations, gpus: list[str],
             mig_parents: dict[str, str] | None = None) -> dict[str, PodRef]:
    """{GPU UUID: pod} for the GPUs (UUIDs, as NVML lists them) that a pod was allocated."""
    out: dict[str, PodRef] = {}
    for uuid in gpus:
        pod = allocs.gpus.get(uuid) or allocs.mig.get(uuid)
        if pod is not None:
            out[uuid] = pod
    holders: dict[str, set[PodRef]] = {}
    for mig_uuid, pod in allocs.mig.items():
        parent = (mig_parents or {}).get(mig_uuid)
        if parent is not None:
            holders.setdefault(parent, set()).add(pod)
    known = set(gpus)
    for parent, pods in holders.items():
        if parent in known and parent not in out and len(pods) == 1:
            out[parent] = next(iter(pods))
    return out


class PodMap:
    """The node's pod per GPU at each sample: one pod-resources List, and the kubelet's
    /pods (cached) for the pods' UIDs and owners when ``pods_url`` is set."""

    def __init__(self, socket_path: str, pods_url: str = "", token_file: str = "",
                 ca_file: str = "", user_label: str = "") -> None:
        self.client = PodResources(socket_path)
        self.meta = KubeletPods(pods_url, token_file, ca_file,
                                user_label=user_label) if pods_url else None
        if self.client.missing:
            log.warning("kubelet_socket is set but Kubernetes attribution cannot run: %s. "
                        "GPUs are attributed by process cgroups only (no idle allocated "
                        "GPU, no namespace or owner)", self.client.missing)

    def of_gpus(self, gpus: list[str],
                mig_parents: dict[str, str] | None = None) -> dict[str, PodRef] | None:
        """{GPU UUID: pod}, or None when the kubelet could not be asked this time."""
        allocs = self.client.list()
        if allocs is None:
            return None
        found = gpu_pods(allocs, gpus, mig_parents)
        if self.meta is None:
            return found
        out = {}
        for uuid, pod in found.items():
            meta = self.meta.lookup(pod.namespace, pod.name)
            if meta is not None:
                pod = replace(pod, uid=meta.uid, owner_kind=meta.owner_kind,
                              owner_name=meta.owner_name, user=meta.user,
                              start_time=meta.start_time)
            out[uuid] = pod
        return out

    def close(self) -> None:
        self.client.close()
