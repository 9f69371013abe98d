"""What a GPU node's kubelet answers, for the Kubernetes attribution tests: a real gRPC
pod-resources server on a unix socket, and the kubelet's /pods over real HTTP.

Shapes and values, with their sources:
- The messages are the collector's own (collectors/attribution/podresources.py, defined
  from the documented service and messages:
  https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/#monitoring-device-plugin-resources),
  served by grpcio's generic handlers on the documented method paths
  (``/v1.PodResourcesLister/List`` and ``/Get``), as the kubelet serves them.
- Resource names and device ids are the NVIDIA device plugin's: ``nvidia.com/gpu`` with GPU
  UUIDs as device ids, ``<uuid>::<replica>`` for a time-slicing replica, and
  ``nvidia.com/mig-1g.10gb`` with MIG UUIDs (NVIDIA/k8s-device-plugin
  internal/rm/devices.go at d7862257e3d991d8ec0fac9d12bd591da531f66b; README, "mixed"
  MIG strategy). The UUIDs are the test NVML's (collector_fakes.FakeGpu).
- A pod's CPU and memory assignment (cpu_ids, memory) is filled as the kubelet does for
  a Guaranteed pod, and a non-GPU device plugin resource is listed beside the GPUs: the
  collector must ignore both.
- The /pods document is a v1 PodList: ObjectMeta ``uid``, ``labels``, ``ownerReferences``
  (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/object-meta/);
  a Deployment's pod is owned by the ReplicaSet ``<deployment>-<pod-template-hash>`` and
  carries that label (https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#pod-template-hash-label);
  a Job's pod by the Job, with ``controller: true``. Label and annotation keys follow the
  documented syntax (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set);
  ``USER_LABEL`` stands for whatever key a site's platform records a pod's user under (no
  Kubernetes field says it): the trainer carries it as a label, the evaluation pod as an
  annotation.
- Each pod's ``status.startTime``, RFC 3339 in UTC as the API server writes times
  (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#PodStatus:
  "RFC 3339 date and time at which the object was acknowledged by the Kubelet"):
  the trainer two hours and the evaluation pod ten minutes before ``pod_list``'s ``now``.
"""

from __future__ import annotations

import datetime as dt
import http.server
import json
import os
import threading
import time
from concurrent import futures

import grpc

from collectors.attribution import podresources as pb

UUID = [f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd" for i in range(4)]
MIG = "MIG-41b2c3d4-5e6f-5a7b-8c9d-0e1f2a3b4c5d"

TRAINER_UID = "6b1f3c2e-0d4b-4e8f-9a6c-1b2d3e4f5a60"
EVAL_UID = "0f9e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f"
TRAINER = ("ml-team", "trainer-7d4b9c8f6-x2x9k")
USER_LABEL = "example.org/user"
TRAINER_USER, EVAL_USER = "alice", "bob"
EVAL = ("research", "eval-28474560-qz7lp")

TRAINER_CGROUP = (
    "0::/kubepods.slice/kubepods-burstable.slice/"
    f"kubepods-burstable-pod{TRAINER_UID.replace('-', '_')}.slice/"
    "cri-containerd-0123456789abcdef.scope\n"
)


def pod(namespace, name, *containers):
    return pb.PodResources(name=name, namespace=namespace, containers=list(containers))


def container(name, *devices, cpu_ids=(), memory=()):
    return pb.ContainerResources(name=name, devices=list(devices), cpu_ids=list(cpu_ids),
                                 memory=list(memory))


def devices(resource, *ids, numa=0):
    return pb.ContainerDevices(resource_name=resource, device_ids=list(ids),
                               topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=numa)]))


def node_pods():
    """The trainer holds GPUs 0 and 1 (a process runs on 0 only), the evaluation job GPU 2
    (idle: nothing runs), GPU 3 is free; a sidecar holds no GPU."""
    return [
        pod(*TRAINER,
            container("trainer", devices("nvidia.com/gpu", UUID[0], UUID[1]),
                      cpu_ids=[2, 3, 4, 5],
                      memory=[pb.ContainerMemory(memory_type="memory", size=34359738368)]),
            container("log-shipper")),
        pod(*EVAL, container("eval", devices("nvidia.com/gpu", f"{UUID[2]}::1"),
                             devices("example.com/fpga", "fpga-0"))),
        pod("kube-system", "nvidia-device-plugin-daemonset-8xk2q", container("nvidia-device-plugin")),
    ]  # fmt: skip


class Lister:
    """The kubelet's side: answers List from ``pods`` (changed by the test between calls)
    and Get when ``with_get`` (the KubeletPodResourcesGet feature gate); without it Get
    answers UNIMPLEMENTED, as a kubelet that does not serve the method."""

    def __init__(self, pods, with_get=True):
        self.pods = pods
        self.with_get = with_get
        self.calls = []

    def List(self, request, context):
        self.calls.append("List")
        return pb.ListPodResourcesResponse(pod_resources=self.pods)

    def Get(self, request, context):
        self.calls.append("Get")
        if not self.with_get:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not implemented!")
        for p in self.pods:
            if (p.namespace, p.name) == (request.pod_namespace, request.pod_name):
                return pb.GetPodResourcesResponse(pod_resources=p)
        context.abort(grpc.StatusCode.NOT_FOUND,
                      f"pod {request.pod_name} not found in {request.pod_namespace}")


def serve(socket_path, lister):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handlers = {}
    for path, (request, response) in pb.METHODS.items():
        method = path.rsplit("/", 1)[1]
        handlers[method] = grpc.unary_unary_rpc_method_handler(
            getattr(lister, method), request_deserializer=request.FromString,
            response_serializer=response.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(pb.SERVICE, handlers),))
    server.add_insecure_port(f"unix://{socket_path}")
    server.start()
    assert os.path.exists(socket_path)
    return server


TRAINER_STARTED_AGO_S, EVAL_STARTED_AGO_S = 7200, 600


def rfc3339(ts: float) -> str:
    """A time as the API server writes one: RFC 3339, UTC, whole seconds."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_list(now: float | None = None):
    now = time.time() if now is None else now
    def item(namespace, name, uid, owner, labels=None, annotations=None, started=None):
        return {"metadata": {"name": name, "namespace": namespace, "uid": uid,
                             "labels": labels or {}, "annotations": annotations or {},
                             "ownerReferences": [owner]},
                "spec": {"nodeName": "gpu-a017"},
                "status": {"phase": "Running", "startTime": started}}

    return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [
        item(*TRAINER, TRAINER_UID,
             {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "trainer-7d4b9c8f6",
              "uid": "e2a1b0c9-8d7e-4f6a-9b5c-4d3e2f1a0b9c", "controller": True,
              "blockOwnerDeletion": True},
             {"app": "trainer", "pod-template-hash": "7d4b9c8f6",
              USER_LABEL: TRAINER_USER}, started=rfc3339(now - TRAINER_STARTED_AGO_S)),
        item(*EVAL, EVAL_UID,
             {"apiVersion": "batch/v1", "kind": "Job", "name": "eval-28474560",
              "uid": "5c4b3a29-1807-4f6e-8d5c-4b3a29180706", "controller": True,
              "blockOwnerDeletion": True},
             {"batch.kubernetes.io/job-name": "eval-28474560"},
             {USER_LABEL: EVAL_USER}, started=rfc3339(now - EVAL_STARTED_AGO_S)),
    ]}  # fmt: skip


class PodsServer:
    """The kubelet's GET /pods on a local port, answering only with the bearer token."""

    def __init__(self, token, doc):
        self.requests = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests += 1
                if self.headers.get("Authorization") != f"Bearer {token}":
                    self.send_error(401)
                    return
                body = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/pods"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def collector_batch(tmp_path, now: float, *, owners: bool = True, user_label: str = ""
                    ) -> dict:
    """One batch as the real collector builds it on a Kubernetes node at ``now``: its kubelet
    as above (the /pods too when ``owners``), GPU 0 running the trainer's process;
    ``user_label``: the collector's ``kubelet_user_label``."""
    import shutil
    import tempfile

    from collectors.agent import Agent
    from collectors.config import Config
    from tests.collectors.collector_fakes import FakeGpu, FakeNVML
    from tests.collectors.sysfs_trees import add_process

    roots = {name: str(tmp_path / name) for name in ("sys", "proc", "cgroup", "jobmap")}
    for path in roots.values():
        os.makedirs(path, exist_ok=True)
    nvml = FakeNVML([FakeGpu(i) for i in range(4)])
    nvml.gpus[0].values["pids"] = [4242]
    add_process(roots["proc"], 4242, TRAINER_CGROUP)
    folder = tempfile.mkdtemp(prefix="kubelet-", dir="/tmp")
    sock = f"{folder}/kubelet.sock"
    server = serve(sock, Lister(node_pods()))
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    pods = PodsServer("s3cret-token", pod_list(now)) if owners else None
    try:
        config = Config(cluster="k8s", node="gpu-k001", sysfs_root=roots["sys"],
                        procfs_root=roots["proc"], cgroup_root=roots["cgroup"],
                        job_map_dir=roots["jobmap"], kubelet_socket=sock,
                        kubelet_pods_url=pods.url if pods else "",
                        kubelet_token_file=str(token),
                        kubelet_user_label=user_label if pods else "")  # fmt: skip
        agent = Agent(config, nvml=nvml, clock=lambda: now)
        agent.sample()
        batch = agent.build_batch()
        agent.close()
    finally:
        server.stop(None)
        if pods is not None:
            pods.close()
        shutil.rmtree(folder, ignore_errors=True)
    return batch
