"""Kubernetes pod attribution: the collector asks a real gRPC pod-resources server (the
kubelet's side, tests/collectors/kubelet_fixtures.py) which pod holds each GPU, and the
batch says so, idle allocated GPUs included."""

import logging
import shutil
import sys
import tempfile

import pytest

from collectors.agent import Agent
from collectors.attribution import JobAttributor
from collectors.attribution.kubelet import Allocations, PodRef, PodResources
from collectors.attribution.podmap import gpu_pods
from collectors.attribution.pods import owner_of, start_of, user_of
from collectors.config import Config, ConfigError
from tests.collectors import kubelet_fixtures as k
from tests.collectors.collector_fakes import FakeGpu, FakeNVML
from tests.collectors.sysfs_trees import add_process


@pytest.fixture
def sock():
    # A unix socket path must fit in 108 bytes: pytest's tmp_path may not.
    folder = tempfile.mkdtemp(prefix="kubelet-", dir="/tmp")
    yield f"{folder}/kubelet.sock"
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def kubelet(sock):
    lister = k.Lister(k.node_pods())
    server = k.serve(sock, lister)
    yield lister
    server.stop(None)


class Clock:
    t = 1763799980.0

    def __call__(self):
        return self.t


@pytest.fixture
def warnings():
    """The WARNING records of the collector's loggers, caught by a handler of its own (the
    suite runs with pytest's logging plugin off)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    log = logging.getLogger("collectors")
    log.addHandler(handler)
    yield records
    log.removeHandler(handler)


def make_agent(roots, sock, **settings):
    nvml = FakeNVML([FakeGpu(i) for i in range(4)])
    nvml.gpus[0].values["pids"] = [4242]
    add_process(roots["proc"], 4242, k.TRAINER_CGROUP)
    config = Config(cluster="k8s", node="gpu-a017", sysfs_root=roots["sys"],
                    procfs_root=roots["proc"], cgroup_root=roots["cgroup"],
                    job_map_dir=roots["jobmap"], kubelet_socket=sock, **settings)  # fmt: skip
    clock = Clock()
    return Agent(config, nvml=nvml, clock=clock), clock


def owners(batch):
    """{GPU index: job id} of the batch's samples, and {job id: job}."""
    by_gpu = {}
    for row in batch["gpu_samples"]["rows"]:
        by_gpu.setdefault(row[1], set()).add(row[2])
    return by_gpu, {j["id"]: j for j in batch["jobs"]}


def test_idle_allocated_gpus_are_attributed_to_their_pods(roots, sock, kubelet):
    agent, _ = make_agent(roots, sock)
    agent.sample()
    batch = agent.build_batch()
    agent.close()
    by_gpu, jobs = owners(batch)
    # GPU 1 runs nothing but the trainer holds it; GPU 2 (a time-slicing replica's id)
    # the evaluation pod, idle; GPU 3 nobody.
    eval_id = "research/eval-28474560-qz7lp"  # no /pods configured: its name is its id
    assert by_gpu == {0: {k.TRAINER_UID}, 1: {k.TRAINER_UID}, 2: {eval_id}, 3: {None}}
    trainer = jobs[k.TRAINER_UID]
    assert (trainer["scheduler"], trainer["namespace"], trainer["pod"], trainer["name"],
            trainer["gpus"]) == ("kubernetes", "ml-team", k.TRAINER[1], k.TRAINER[1], [0, 1])
    assert jobs[eval_id]["namespace"] == "research" and jobs[eval_id]["gpus"] == [2]
    assert "owner_kind" not in jobs[eval_id]  # not known without the kubelet's /pods
    assert kubelet.calls == ["List"]


def _two_samples_with_pods(roots, sock, tmp_path, token_text, **settings):
    """(batch of two samples, the /pods server) with the kubelet's /pods (which takes
    "s3cret-token") read with ``token_text``."""
    token = tmp_path / "token"
    token.write_text(token_text + "\n")
    pods = k.PodsServer("s3cret-token", k.pod_list(Clock.t))
    try:
        agent, clock = make_agent(roots, sock, kubelet_pods_url=pods.url,
                                  kubelet_token_file=str(token), **settings)
        agent.sample()
        clock.t += 10
        agent.sample()
        batch = agent.build_batch()
        agent.close()
    finally:
        pods.close()
    return batch, pods


def test_kubelet_pods_give_uid_and_owning_workload(roots, sock, kubelet, tmp_path):
    batch, pods = _two_samples_with_pods(roots, sock, tmp_path, "s3cret-token")
    by_gpu, jobs = owners(batch)
    assert by_gpu == {0: {k.TRAINER_UID}, 1: {k.TRAINER_UID}, 2: {k.EVAL_UID}, 3: {None}}
    trainer, evaluation = jobs[k.TRAINER_UID], jobs[k.EVAL_UID]
    assert (trainer["owner_kind"], trainer["owner_name"]) == ("Deployment", "trainer")
    assert (evaluation["owner_kind"], evaluation["owner_name"]) == ("Job", "eval-28474560")
    assert (evaluation["namespace"], evaluation["pod"]) == k.EVAL
    assert pods.requests == 1  # cached: every pod asked for was in the first answer
    assert trainer["user"] is None and evaluation["user"] is None  # no user label set
    # Each pod's status.startTime (whole seconds) is its job's start.
    assert trainer["started_at"] == int(Clock.t) - k.TRAINER_STARTED_AGO_S
    assert evaluation["started_at"] == int(Clock.t) - k.EVAL_STARTED_AGO_S


def test_the_configured_label_or_annotation_names_a_pods_user(roots, sock, kubelet, tmp_path):
    batch, _ = _two_samples_with_pods(roots, sock, tmp_path, "s3cret-token",
                                      kubelet_user_label=k.USER_LABEL)
    _, jobs = owners(batch)
    assert jobs[k.TRAINER_UID]["user"] == k.TRAINER_USER  # from the pod's label
    assert jobs[k.EVAL_UID]["user"] == k.EVAL_USER  # from the pod's annotation


def test_a_user_is_a_short_non_empty_string_label_first():
    def meta(labels=None, annotations=None):
        return {"labels": labels or {}, "annotations": annotations or {}}

    key = "example.org/user"
    assert user_of(meta({key: " carol "}, {key: "dave"}), key) == "carol"
    assert user_of(meta({key: ""}, {key: "dave"}), key) == "dave"
    assert user_of(meta({key: "x" * 65}), key) is None  # the server's limit is 64
    assert user_of(meta({key: "x" * 64}), key) == "x" * 64
    assert user_of(meta(annotations={key: ["dave"]}), key) is None
    assert user_of({"labels": None}, key) is None and user_of(meta({key: "a"}), "") is None


def test_a_pods_start_is_its_rfc3339_start_time_with_a_zone():
    assert start_of({"startTime": "2025-11-22T08:13:20Z"}) == 1763799200.0
    assert start_of({"startTime": "2025-11-22T09:13:20+01:00"}) == 1763799200.0
    assert start_of({"startTime": "2025-11-22T08:13:20"}) is None  # no zone: not RFC 3339
    for status in ({}, {"startTime": None}, {"startTime": 1763799200}, {"startTime": "soon"},
                   None, "Running"):
        assert start_of(status) is None, status


@pytest.mark.parametrize("key", ["user", "example.org/user", "a.b-c/U_s.e-r9"])
def test_a_user_label_key_is_checked_as_kubernetes_defines_one(key):
    settings = {"CLUSTERUI_KUBELET_SOCKET": "/s",
                "CLUSTERUI_KUBELET_PODS_URL": "https://127.0.0.1:10250/pods"}
    config = Config.load(None, {**settings, "CLUSTERUI_KUBELET_USER_LABEL": key})
    assert config.kubelet_user_label == key
    for bad in ("-user", "user-", "Example.org/user", "a/b/c", "/user", "x" * 64,
                "u ser", f"{'a' * 254}/user"):
        with pytest.raises(ConfigError, match="^kubelet_user_label: must be a Kubernetes label key"):
            Config.load(None, {**settings, "CLUSTERUI_KUBELET_USER_LABEL": bad})
    with pytest.raises(ConfigError, match="^kubelet_user_label: .*set kubelet_pods_url"):
        Config.load(None, {"CLUSTERUI_KUBELET_SOCKET": "/s",
                           "CLUSTERUI_KUBELET_USER_LABEL": key})


def test_a_pod_keeps_its_id_and_ends_when_the_kubelet_drops_it(roots, sock, kubelet):
    agent, clock = make_agent(roots, sock)
    agent.sample()
    agent.build_batch()
    kubelet.pods = [p for p in kubelet.pods if p.name != k.EVAL[1]]
    clock.t += 10
    agent.sample()
    batch = agent.build_batch()
    agent.close()
    by_gpu, jobs = owners(batch)
    assert by_gpu[2] == {None}
    ended = jobs["research/eval-28474560-qz7lp"]
    assert ended["ended_at"] == clock.t and ended["gpus"] == []
    assert jobs[k.TRAINER_UID]["ended_at"] is None


def test_without_a_kubelet_the_collector_attributes_by_cgroup(roots, sock, warnings):
    agent, clock = make_agent(roots, sock)  # nothing listens on the socket
    agent.sample()
    clock.t += 10
    agent.sample()
    batch = agent.build_batch()
    agent.close()
    by_gpu, jobs = owners(batch)
    assert by_gpu == {0: {k.TRAINER_UID}, 1: {None}, 2: {None}, 3: {None}}
    assert "namespace" not in jobs[k.TRAINER_UID]
    messages = [r.getMessage() for r in warnings]
    assert len(messages) == 1 and "cannot be read (UNAVAILABLE" in messages[0]


def test_without_grpc_the_collector_runs_and_says_why(roots, sock, monkeypatch, warnings):
    for name in [m for m in sys.modules if m in ("grpc", "collectors.attribution.podresources") or m.startswith("grpc.")]:  # fmt: skip
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "grpc", None)  # as if grpcio were not installed
    agent, _ = make_agent(roots, sock)
    agent.sample()
    batch = agent.build_batch()
    agent.close()
    assert owners(batch)[0][0] == {k.TRAINER_UID}  # the cgroup still names the pod
    [message] = [r.getMessage() for r in warnings]
    assert "kubelet_socket is set but Kubernetes attribution cannot run" in message
    assert "pip install 'clusterui-collector[kubernetes]'" in message


def test_get_one_pod_and_a_kubelet_without_get(sock, kubelet):
    client = PodResources(sock)
    found = client.get(*k.EVAL)
    assert found.gpus == {k.UUID[2]: PodRef(*k.EVAL, containers=("eval",))}
    assert client.get("research", "gone") is None  # NOT_FOUND
    kubelet.with_get = False  # the KubeletPodResourcesGet feature gate off
    assert client.get(*k.EVAL) is None
    assert client.list().gpus.keys() == {k.UUID[0], k.UUID[1], k.UUID[2]}
    client.close()


def test_mig_devices_go_to_their_instance_or_wait_for_their_parent_gpu(sock):
    lister = k.Lister([k.pod("ml-team", "mig-user",
                             k.container("c", k.devices("nvidia.com/mig-1g.10gb", k.MIG)))])
    server = k.serve(sock, lister)
    try:
        allocs = PodResources(sock).list()
    finally:
        server.stop(None)
    assert allocs.gpus == {} and set(allocs.mig) == {k.MIG}
    assert gpu_pods(allocs, k.UUID) == {}  # which GPU a MIG device is on: not known here
    # The collector sends each MIG instance as a GPU of its own, under its MIG- UUID: the
    # pod holding the instance is its job, and the whole GPU is not claimed.
    assert {u: p.name for u, p in gpu_pods(allocs, [*k.UUID, k.MIG]).items()} == {
        k.MIG: "mig-user"}
    assert gpu_pods(allocs, k.UUID, {k.MIG: k.UUID[3]})[k.UUID[3]].name == "mig-user"
    two = Allocations({}, {k.MIG: PodRef("a", "p"), "MIG-other": PodRef("b", "q")})
    assert gpu_pods(two, k.UUID, {k.MIG: k.UUID[3], "MIG-other": k.UUID[3]}) == {}


def test_pods_url_needs_the_socket():
    with pytest.raises(ConfigError, match="^kubelet_pods_url: .*set kubelet_socket"):
        Config.load(None, {"CLUSTERUI_KUBELET_PODS_URL": "https://127.0.0.1:10250/pods"})
    with pytest.raises(ConfigError, match="^kubelet_pods_url: must be an http"):
        Config.load(None, {"CLUSTERUI_KUBELET_SOCKET": "/s", "CLUSTERUI_KUBELET_PODS_URL": "x"})


def test_owner_is_the_controller_and_a_deployments_replicaset_is_named_as_it():
    def meta(kind, name, labels=None, controller=True):
        return {"labels": labels or {}, "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "not-the-controller"},
            {"apiVersion": "apps/v1", "kind": kind, "name": name, "controller": controller}]}

    hashed = {"pod-template-hash": "7d4b9c8f6"}
    assert owner_of(meta("ReplicaSet", "trainer-7d4b9c8f6", hashed)) == ("Deployment", "trainer")
    # A ReplicaSet of its own (no Deployment's hash in its name) stays one.
    assert owner_of(meta("ReplicaSet", "workers")) == ("ReplicaSet", "workers")
    assert owner_of(meta("ReplicaSet", "workers", hashed)) == ("ReplicaSet", "workers")
    assert owner_of(meta("StatefulSet", "notebook")) == ("StatefulSet", "notebook")
    assert owner_of({"name": "bare-pod"}) == (None, None)


def test_a_kubelet_pods_refusal_leaves_pods_known_by_name(roots, sock, kubelet, tmp_path,
                                                          warnings):
    batch, _ = _two_samples_with_pods(roots, sock, tmp_path, "expired")  # answered 401
    by_gpu, jobs = owners(batch)
    assert by_gpu[2] == {"research/eval-28474560-qz7lp"} and by_gpu[0] == {k.TRAINER_UID}
    assert "owner_kind" not in jobs[k.TRAINER_UID]
    messages = [r.getMessage() for r in warnings]
    assert len(messages) == 1 and "HTTP Error 401" in messages[0]


def test_a_pod_recreated_under_its_name_is_a_new_job(roots):
    """A StatefulSet's pod deleted and created again keeps its name, not its UID: the
    attributor ends the old job and starts the new one."""
    attributor = JobAttributor(roots["proc"], roots["cgroup"], roots["jobmap"])
    gpus = [(0, k.UUID[0], [])]
    old = PodRef("research", "notebook-0", uid=k.EVAL_UID, owner_kind="StatefulSet",
                 owner_name="notebook")
    new = PodRef("research", "notebook-0", uid=k.TRAINER_UID, owner_kind="StatefulSet",
                 owner_name="notebook")
    owners, _ = attributor.attribute(100.0, gpus, pods={k.UUID[0]: old})
    assert owners[k.UUID[0]].ref.id == k.EVAL_UID
    owners, ended = attributor.attribute(110.0, gpus, pods={k.UUID[0]: new})
    assert owners[k.UUID[0]].ref.id == k.TRAINER_UID
    assert [j.ref.id for j in ended] == [k.EVAL_UID]
    # Known by name only at first, it keeps that id when its UID is learnt later.
    by_name = PodRef("research", "eval-0")
    owners, _ = attributor.attribute(120.0, gpus, pods={k.UUID[0]: by_name})
    assert owners[k.UUID[0]].ref.id == "research/eval-0"
    owners, ended = attributor.attribute(130.0, gpus, pods={k.UUID[0]: PodRef(
        "research", "eval-0", uid=k.EVAL_UID)})
    assert owners[k.UUID[0]].ref.id == "research/eval-0" and ended == []
