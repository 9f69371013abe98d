"""A pod's UID and owning workload, from the node's kubelet (``GET /pods``), cached.

The pod-resources API names a pod by namespace and name only. The kubelet's own
``/pods`` endpoint (the node's pods as a ``v1 PodList``; on the authenticated port 10250 it
takes a service account's bearer token that may ``get nodes/proxy``) adds each pod's
``metadata.uid`` (the id its cgroup path carries, so a pod is the same job whether a
process or the kubelet named it), ``metadata.ownerReferences`` and ``status.startTime``
("RFC 3339 date and time at which the object was acknowledged by the Kubelet. This is
before the Kubelet pulled the container image(s) for the pod": the Pod API reference,
PodStatus), which is the job's start.

The owner is the controller reference (``controller: true``). A Deployment's pods are
owned by a ReplicaSet named ``<deployment>-<pod-template-hash>``, the hash also being the
pod's ``pod-template-hash`` label (Kubernetes docs, Deployments, "Pod-template-hash
label"): such a ReplicaSet is reported as its Deployment. Other kinds (Job, StatefulSet,
DaemonSet, a bare ReplicaSet, a custom resource) are reported as they are; a CronJob's
Job stays a Job (only the API server knows its CronJob).

A pod's user is the value of the label (or, failing that, the annotation) the
configuration names (``kubelet_user_label``): Kubernetes has no field for whom a pod runs
for; platforms record it in a label or annotation of their own.

Optional (``kubelet_pods_url``): without it a pod is known by namespace and name. Read at
most once per ``ttl`` seconds, and only when a pod is asked for that the last read did
not list.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

log = logging.getLogger(__name__)

TIMEOUT_S = 3.0
TTL_S = 30.0


# The server refuses a job's user longer than this (clusterui/ingest/validate.py): a
# longer label value is not taken for one.
MAX_USER = 64


@dataclass(frozen=True)
class PodMeta:
    uid: str | None
    owner_kind: str | None
    owner_name: str | None
    user: str | None = None
    start_time: float | None = None  # Unix seconds


def user_of(metadata: dict, key: str) -> str | None:
    """The pod's user: the value of label ``key``, else of annotation ``key``; None when
    neither is a non-empty string of at most MAX_USER characters."""
    if not key:
        return None
    for field in ("labels", "annotations"):
        values = metadata.get(field)
        value = values.get(key) if isinstance(values, dict) else None
        user = value.strip() if isinstance(value, str) else ""
        if user and len(user) <= MAX_USER:
            return user
    return None


def start_of(status) -> float | None:
    """A pod's ``status.startTime`` in Unix seconds; None when absent or not an RFC 3339
    time with its zone (the API server writes UTC: ``2024-05-02T09:14:03Z``)."""
    text = status.get("startTime") if isinstance(status, dict) else None
    if not isinstance(text, str):
        return None
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.timestamp()


def owner_of(metadata: dict) -> tuple[str | None, str | None]:
    """(kind, name) of a pod's controlling owner, a Deployment for its ReplicaSet."""
    refs = metadata.get("ownerReferences") or []
    refs = [r for r in refs if isinstance(r, dict) and r.get("kind") and r.get("name")]
    if not refs:
        return None, None
    ref = next((r for r in refs if r.get("controller")), refs[0])
    kind, name = str(ref["kind"]), str(ref["name"])
    template_hash = (metadata.get("labels") or {}).get("pod-template-hash")
    if kind == "ReplicaSet" and template_hash and name.endswith("-" + template_hash):
        return "Deployment", name[: -len(template_hash) - 1]
    return kind, name


def parse_pod_list(doc, user_label: str = "") -> dict[tuple[str, str], PodMeta]:
    """{(namespace, name): PodMeta} of a ``PodList``; items without both are skipped.
    ``user_label``: the label or annotation naming a pod's user (``user_of``)."""
    out = {}
    items = doc.get("items") if isinstance(doc, dict) else None
    for item in items or []:
        meta = item.get("metadata") if isinstance(item, dict) else None
        if not isinstance(meta, dict) or not meta.get("namespace") or not meta.get("name"):
            continue
        kind, name = owner_of(meta)
        out[(meta["namespace"], meta["name"])] = PodMeta(meta.get("uid") or None, kind, name,
                                                         user_of(meta, user_label),
                                                         start_of(item.get("status")))
    return out


class KubeletPods:
    def __init__(self, url: str, token_file: str = "", ca_file: str = "",
                 ttl: float = TTL_S, clock=time.monotonic, user_label: str = "") -> None:
        self.url = url
        self.user_label = user_label
        self.token_file = token_file
        self.ca_file = ca_file
        self.ttl = ttl
        self.clock = clock
        self._pods: dict[tuple[str, str], PodMeta] = {}
        self._read_at: float | None = None
        self._failing = False

    def lookup(self, namespace: str, name: str) -> PodMeta | None:
        key = (namespace, name)
        if key not in self._pods and (self._read_at is None
                                      or self.clock() - self._read_at >= self.ttl):
            self._refresh()
        return self._pods.get(key)

    def _refresh(self) -> None:
        self._read_at = self.clock()
        try:
            doc = self._fetch()
        except (OSError, ValueError) as exc:  # URLError, HTTPError, timeouts, bad JSON
            if not self._failing:
                log.warning("kubelet pods at %s cannot be read (%s): pods are known by "
                            "namespace and name only until it answers", self.url, exc)
                self._failing = True
            return
        self._failing = False
        self._pods = parse_pod_list(doc, self.user_label)

    def _fetch(self):
        request = urllib.request.Request(self.url, headers={"Accept": "application/json"})
        if self.token_file:
            with open(self.token_file, encoding="utf-8") as fh:
                request.add_header("Authorization", f"Bearer {fh.read().strip()}")
        context = None
        if self.url.startswith("https:"):
            context = ssl.create_default_context(cafile=self.ca_file or None)
        with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as reply:
            return json.loads(reply.read())
