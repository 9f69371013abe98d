"""The kubelet's pod-resources API (v1), the messages the collector exchanges with it.

Defined here from the interface's public documentation, the Kubernetes page "Device
Plugins", section "Monitoring device plugin resources":
https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/#monitoring-device-plugin-resources
It shows the gRPC service ``PodResourcesLister`` (proto3, package ``v1``) that the kubelet
serves on ``/var/lib/kubelet/pod-resources/kubelet.sock`` and its messages, with their field
names and numbers. Those are what goes on the wire, so they are kept exactly as documented:
a real kubelet answers these messages.

The descriptor is built field by field (``descriptor_pb2``) in a pool of this module's own,
and the message classes come from protobuf's message factory: no ``.proto`` file, no protoc,
no generated stubs. The calls go through grpcio's generic API on the method paths below
(``channel.unary_unary(LIST, ...)``), with each message's ``SerializeToString`` and
``FromString`` as (de)serializers (``serializers``).

Only what the collector (and its test kubelet) reads is declared: ``List`` and ``Get``,
not ``GetAllocatableResources``, and of ``ContainerResources`` not the dynamic (DRA)
resources, field 5. Fields a kubelet sends that are not declared here are kept as unknown
fields by protobuf and ignored.

Imports ``google.protobuf`` (the collector's ``kubernetes`` extra): import it only through
``collectors.attribution.kubelet``, which says when it is missing.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "v1"
SERVICE = f"{PACKAGE}.PodResourcesLister"
LIST = f"/{SERVICE}/List"
GET = f"/{SERVICE}/Get"

_F = descriptor_pb2.FieldDescriptorProto
_STRING, _INT64, _UINT64, _MESSAGE = _F.TYPE_STRING, _F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_MESSAGE
_ONE, _MANY = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

# (message, [(field, number, type, label, message type of a message field)]), as documented.
_MESSAGES = [
    ("ListPodResourcesRequest", []),
    ("ListPodResourcesResponse", [("pod_resources", 1, _MESSAGE, _MANY, "PodResources")]),
    ("PodResources", [
        ("name", 1, _STRING, _ONE, None),
        ("namespace", 2, _STRING, _ONE, None),
        ("containers", 3, _MESSAGE, _MANY, "ContainerResources"),
    ]),
    ("ContainerResources", [
        ("name", 1, _STRING, _ONE, None),
        ("devices", 2, _MESSAGE, _MANY, "ContainerDevices"),
        ("cpu_ids", 3, _INT64, _MANY, None),
        ("memory", 4, _MESSAGE, _MANY, "ContainerMemory"),
    ]),
    ("ContainerMemory", [
        ("memory_type", 1, _STRING, _ONE, None),
        ("size", 2, _UINT64, _ONE, None),
        ("topology", 3, _MESSAGE, _ONE, "TopologyInfo"),
    ]),
    ("ContainerDevices", [
        ("resource_name", 1, _STRING, _ONE, None),
        ("device_ids", 2, _STRING, _MANY, None),
        ("topology", 3, _MESSAGE, _ONE, "TopologyInfo"),
    ]),
    ("TopologyInfo", [("nodes", 1, _MESSAGE, _MANY, "NUMANode")]),
    ("NUMANode", [("ID", 1, _INT64, _ONE, None)]),
    ("GetPodResourcesRequest", [
        ("pod_name", 1, _STRING, _ONE, None),
        ("pod_namespace", 2, _STRING, _ONE, None),
    ]),
    ("GetPodResourcesResponse", [("pod_resources", 1, _MESSAGE, _ONE, "PodResources")]),
]  # fmt: skip

# (method, request, response): unary calls, the method paths LIST and GET.
_METHODS = [
    ("List", "ListPodResourcesRequest", "ListPodResourcesResponse"),
    ("Get", "GetPodResourcesRequest", "GetPodResourcesResponse"),
]


def _file() -> descriptor_pb2.FileDescriptorProto:
    # The file's name only identifies it in this module's pool; it is not on the wire.
    proto = descriptor_pb2.FileDescriptorProto(
        name="clusterui/collectors/podresources_v1.proto", package=PACKAGE, syntax="proto3")
    for name, fields in _MESSAGES:
        message = proto.message_type.add(name=name)
        for field, number, kind, label, type_name in fields:
            added = message.field.add(name=field, number=number, type=kind, label=label)
            if type_name:
                added.type_name = f".{PACKAGE}.{type_name}"
    service = proto.service.add(name=SERVICE.rsplit(".", 1)[1])
    for name, request, response in _METHODS:
        service.method.add(name=name, input_type=f".{PACKAGE}.{request}",
                           output_type=f".{PACKAGE}.{response}")
    return proto


# A pool of its own: no clash with another definition of package v1 in protobuf's default
# pool (another library's), and this module can be imported again.
_pool = descriptor_pool.DescriptorPool()
_pool.Add(_file())
FILE = _pool.FindFileByName("clusterui/collectors/podresources_v1.proto")
assert FILE.services_by_name["PodResourcesLister"].full_name == SERVICE


def _message(name: str):
    return message_factory.GetMessageClass(_pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))


ListPodResourcesRequest = _message("ListPodResourcesRequest")
ListPodResourcesResponse = _message("ListPodResourcesResponse")
PodResources = _message("PodResources")
ContainerResources = _message("ContainerResources")
ContainerMemory = _message("ContainerMemory")
ContainerDevices = _message("ContainerDevices")
TopologyInfo = _message("TopologyInfo")
NUMANode = _message("NUMANode")
GetPodResourcesRequest = _message("GetPodResourcesRequest")
GetPodResourcesResponse = _message("GetPodResourcesResponse")

# Method path -> (request class, response class), for both ends of a call.
METHODS = {
    f"/{SERVICE}/{name}": (_message(request), _message(response))
    for name, request, response in _METHODS
}


def serializers(path: str) -> dict:
    """A client's ``request_serializer`` and ``response_deserializer`` for ``path``:
    ``channel.unary_unary(path, **serializers(path))``."""
    request, response = METHODS[path]
    return {"request_serializer": request.SerializeToString,
            "response_deserializer": response.FromString}
