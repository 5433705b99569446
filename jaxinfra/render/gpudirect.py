"""What a GPUDirect stack (`jaxinfra.gpudirect`) adds to a pod, and the cluster's objects for its networks.

The pod's part follows xpk's decorators (AI-Hypercomputer/xpk @ 367c8382 src/xpk/core/workload_decorators/
{tcpx,tcpxo,rdma}_decorator.py): the multi-networking annotations, the daemon as a native sidecar with its devices
annotation, the env, the host volumes and their mounts, the `user-workload` toleration. The network objects follow
cluster-toolkit @ 465b3271 modules/scheduler/gke-cluster (one `GKENetworkParamSet` naming the VPC and subnet, one
`Network` of type Device referring to it, per extra network).
"""

from __future__ import annotations

import json
from typing import Any

from jaxinfra import gpudirect as G
from jaxinfra.gpudirect import Stack
from jaxinfra.upstream import GKE_NETWORKING_API, GKE_NETWORKING_API_GROUP


def decorate(stack: Stack, spec: dict[str, Any], container: dict[str, Any], annotations: dict[str, str]) -> None:
    """Add the stack's parts to a pod template's spec, its training container and its annotations."""
    annotations[G.DEFAULT_INTERFACE] = "eth0"
    annotations[G.INTERFACES] = json.dumps(stack.interfaces(), separators=(",", ":"))
    if stack.daemon is not None:
        annotations[G.DEVICES.format(container=stack.daemon.name)] = "".join(
            f"- path: {d}\n" for d in stack.daemon.devices
        )
        spec["initContainers"] = [daemon(stack), *spec.get("initContainers", [])]
    taken = {e["name"] for e in container.get("env", [])}  # the job's own value wins
    container["env"] = [*container.get("env", []), *({"name": k, "value": v} for k, v in stack.env if k not in taken)]
    container["volumeMounts"] = [
        *container.get("volumeMounts", []),
        *({"name": v.name, "mountPath": v.main} for v in stack.volumes if v.main),
    ]
    spec["volumes"] = [
        *spec.get("volumes", []),
        *({"name": v.name, "hostPath": {"path": v.host_path}} for v in stack.volumes),
    ]
    spec["tolerations"] = [*spec.get("tolerations", []), dict(G.USER_WORKLOAD_TOLERATION)]


def daemon(stack: Stack) -> dict[str, Any]:
    """The GPUDirect daemon: a native sidecar, root with the capabilities xpk gives it (the pod runs as non-root)."""
    d = stack.daemon
    assert d is not None
    c: dict[str, Any] = {
        "name": d.name,
        "image": d.image,
        "imagePullPolicy": "Always",
        "restartPolicy": "Always",
        "command": list(d.command),
    }
    if d.args:
        c["args"] = list(d.args)
    c["env"] = [{"name": "LD_LIBRARY_PATH", "value": G.NVIDIA_LIB}]
    c["securityContext"] = {
        "allowPrivilegeEscalation": False,  # root already: its capabilities need no setuid program
        "runAsUser": 0,
        "runAsNonRoot": False,
        "capabilities": {"add": list(d.capabilities)},
    }
    c["volumeMounts"] = [{"name": v.name, "mountPath": v.daemon} for v in stack.volumes if v.daemon]
    return c


def network_objects(stack: Stack, gke_cluster: str) -> list[dict[str, Any]]:
    """Each of the stack's extra networks as GKE multi-networking sees it: a GKENetworkParamSet (its VPC, subnet and
    device mode), then the Network the pods' interfaces annotation names."""
    out = []
    for n in G.node_networks(stack, gke_cluster):
        out.append(
            {
                "apiVersion": GKE_NETWORKING_API,
                "kind": "GKENetworkParamSet",
                "metadata": {"name": n.name},
                "spec": {"vpc": n.vpc, "vpcSubnet": n.subnet, "deviceMode": n.device_mode},
            }
        )
        out.append(
            {
                "apiVersion": GKE_NETWORKING_API,
                "kind": "Network",
                "metadata": {"name": n.name},
                "spec": {
                    "type": "Device",
                    "parametersRef": {"group": GKE_NETWORKING_API_GROUP, "kind": "GKENetworkParamSet", "name": n.name},
                },
            }
        )
    return out
