"""The downward API: what a pod's `fieldRef` and `resourceFieldRef` read, for the env the kubelet resolves
(`kuberuntime`) and the `downwardAPI` volumes it writes (`volumes`).

Source: kubernetes pkg/kubelet/kubelet_pods.go (podFieldSelectorRuntimeValue), pkg/api/v1/resource/helpers.go
(ExtractResourceValueByContainerName). Each simulated pod has a node of its own, `sim-node-<k>`, and its host IP is
its own address.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from jaxinfra_sim.core.inputs import limit, quantity

_SUBSCRIPT = re.compile(r"metadata\.(labels|annotations)\['(.+)'\]")


@dataclass
class PodFacts:
    """What the downward API can read from one pod. Each simulated pod has its own node `sim-node-<k>`, and
    its host IP is its own loopback address (the simulator's "node" is the pod's address)."""

    name: str
    namespace: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    node: str
    service_account: str
    ip: str
    containers: Sequence[Mapping]

    def field_ref(self, path: str) -> str | None:
        """A fieldRef's value (missing label/annotation keys read as ""), or None for an unsupported path."""
        simple = {
            "metadata.name": self.name,
            "metadata.namespace": self.namespace,
            "metadata.uid": self.uid,
            "spec.nodeName": self.node,
            "spec.serviceAccountName": self.service_account,
            "status.podIP": self.ip,
            "status.podIPs": self.ip,
            "status.hostIP": self.ip,
            "status.hostIPs": self.ip,
        }
        if path in simple:
            return simple[path]
        m = _SUBSCRIPT.fullmatch(path)
        if m:
            return (self.labels if m.group(1) == "labels" else self.annotations).get(m.group(2), "")
        return None

    def resource(self, ref: Mapping, container: Mapping) -> str:
        """A resourceFieldRef, best effort: the limit, else the request, else 0 (node allocatable is unknown here)."""
        if ref.get("containerName"):
            container = next((c for c in self.containers if c.get("name") == ref["containerName"]), container)
        kind, _, res = str(ref.get("resource", "")).partition(".")
        res_map = (container.get("resources") or {}).get(kind) or {}
        value = quantity(res_map.get(res, limit(container, res) or 0)) or Fraction(0)
        divisor = quantity(ref.get("divisor", 1)) or Fraction(1)
        ceiling = math.ceil(value / divisor)
        # The kubelet's int64(math.Ceil(float64(q.Value()) / float64(divisor.Value()))) (helpers.go
        # convertResourceMemoryToString and the like): past int64, Go's float-to-int conversion gives amd64's
        # 0x8000000000000000 (a quantity the API server stores, `memory: 1e5000`: Value() saturates at 2^63 - 1).
        return str(ceiling if -(2**63) <= ceiling < 2**63 else -(2**63))
