"""Which pod holds each GPU, from the kubelet's pod-resources API (v1).

The kubelet serves ``PodResourcesLister`` over a node-local unix socket
(``/var/lib/kubelet/pod-resources/kubelet.sock``): ``List`` gives every pod with the
devices its containers were allocated, whether or not a process runs on them, so a pod
that holds an idle GPU is still attributed (a process's cgroup only names pods that run
something on the GPU). ``Get`` (one pod by namespace and name) needs the kubelet's
``KubeletPodResourcesGet`` feature gate; without it the kubelet answers UNIMPLEMENTED or
an error, and ``get`` returns None. See
https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/#monitoring-device-plugin-resources
whence ``podresources.py`` defines the messages; they are called through grpcio's generic
API on the methods' paths (``/v1.PodResourcesLister/List``), no generated stubs.

GPUs come from the NVIDIA device plugin (NVIDIA/k8s-device-plugin): resource
``nvidia.com/gpu`` (``nvidia.com/gpu.shared`` with time-slicing and ``renameByDefault``),
and ``nvidia.com/mig-<profile>`` for MIG devices under the ``mixed`` strategy (README,
"Configuration option details"). The plugin registers each device with the kubelet under
its UUID, ``GPU-...`` or a MIG device's ``MIG-...``, whatever ``--device-id-strategy`` says
(that picks what the container runtime is handed, uuid by default), and a time-slicing
replica as the UUID and ``::<replica>``: internal/rm/devices.go, ``BuildDevice`` (``dev.ID =
uuid``) and ``NewAnnotatedID``, at commit d7862257e3d991d8ec0fac9d12bd591da531f66b.

grpcio and protobuf are the collector wheel's ``kubernetes`` extra: without them
``PodResources.available()`` says why and the collector attributes by cgroup only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
TIMEOUT_S = 2.0
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


def grpc_missing() -> str | None:
    """Why the pod-resources client cannot run here (grpcio or protobuf missing, or a
    protobuf that cannot build the messages), or None when it can."""
    try:
        import grpc  # noqa: F401
        from google import protobuf  # noqa: F401

        from collectors.attribution import podresources  # noqa: F401
    except ImportError as exc:
        return (f"{exc}: install the collector's kubernetes extra "
                "(pip install 'clusterui-collector[kubernetes]')")
    except (AttributeError, TypeError, ValueError) as exc:  # a protobuf too old for it
        return f"protobuf cannot define the pod-resources messages: {exc}"
    return None


@dataclass(frozen=True)
class PodRef:
    """A pod as the kubelet names it, with what else is known of it (``KubeletPods``)."""

    namespace: str
    name: str
    uid: str | None = None
    owner_kind: str | None = None
    owner_name: str | None = None
    containers: tuple[str, ...] = field(default=(), compare=False)
    user: str | None = None  # a label's or annotation's (``pods.user_of``)
    start_time: float | None = None  # status.startTime, Unix seconds (``pods.start_of``)


@dataclass(frozen=True)
class Allocations:
    """One List answer: {GPU UUID: pod}, and {MIG UUID: pod}."""

    gpus: dict[str, PodRef]
    mig: dict[str, PodRef]


def device_key(device_id: str) -> str:
    """A device id without a time-slicing replica's ``::<n>`` suffix."""
    return device_id.split("::", 1)[0]


def allocations(pods) -> Allocations:
    """The GPU and MIG devices of a ``ListPodResourcesResponse.pod_resources`` (or a list
    of ``PodResources``). A GPU two pods share (time-slicing) goes to the first listed."""
    gpus: dict[str, PodRef] = {}
    mig: dict[str, PodRef] = {}
    for pod in pods:
        found: dict[str, str] = {}  # device -> "gpu" | "mig"
        containers = []
        for container in pod.containers:
            for devices in container.devices:
                name = devices.resource_name
                if name in GPU_RESOURCES:
                    kind = "gpu"
                elif name.startswith(MIG_RESOURCE_PREFIX):
                    kind = "mig"
                else:
                    continue
                containers.append(container.name)
                for device_id in devices.device_ids:
                    found.setdefault(device_key(device_id), kind)
        if not found:
            continue
        ref = PodRef(pod.namespace, pod.name, containers=tuple(dict.fromkeys(containers)))
        for device, kind in found.items():
            # A MIG UUID under nvidia.com/gpu (the plugin's "single" strategy) is MIG too.
            target = mig if kind == "mig" or device.startswith("MIG-") else gpus
            target.setdefault(device, ref)
    return Allocations(gpus, mig)


class PodResources:
    """A client of the kubelet's pod-resources socket. One channel, reopened after an
    error; every call bounded by ``timeout``. ``list()`` returns None when the kubelet
    cannot be asked (logged once per outage), never raises."""

    def __init__(self, socket_path: str = DEFAULT_SOCKET, timeout: float = TIMEOUT_S) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self._channel = None
        self._calls = None  # {method path: callable}
        self._failing = False
        self.missing = grpc_missing()

    def available(self) -> bool:
        return self.missing is None

    def _call(self, path: str, request):
        if self._calls is None:
            import grpc

            from collectors.attribution import podresources as pr

            self._channel = grpc.insecure_channel(f"unix://{self.socket_path}")
            self._calls = {p: self._channel.unary_unary(p, **pr.serializers(p))
                           for p in (pr.LIST, pr.GET)}
        return self._calls[path](request, timeout=self.timeout)

    def list(self) -> Allocations | None:
        if self.missing is not None:
            return None
        import grpc

        from collectors.attribution import podresources as pr

        try:
            reply = self._call(pr.LIST, pr.ListPodResourcesRequest())
        except grpc.RpcError as exc:
            self._fail(exc)
            return None
        if self._failing:
            log.info("kubelet pod-resources at %s answers again", self.socket_path)
            self._failing = False
        return allocations(reply.pod_resources)

    def get(self, namespace: str, name: str) -> Allocations | None:
        """One pod's devices (``Get``), or None where the kubelet does not serve it (the
        feature gate is off: UNIMPLEMENTED) or cannot be asked."""
        if self.missing is not None:
            return None
        import grpc

        from collectors.attribution import podresources as pr

        request = pr.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace)
        try:
            reply = self._call(pr.GET, request)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                log.info("kubelet pod-resources Get %s/%s: %s", namespace, name, exc.details())
            return None
        return allocations([reply.pod_resources])

    def _fail(self, exc) -> None:
        if not self._failing:
            log.warning("kubelet pod-resources at %s cannot be read (%s: %s): GPUs are "
                        "attributed by process cgroups only until it answers",
                        self.socket_path, exc.code().name, exc.details())
            self._failing = True
        self.close()

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel = self._calls = None
