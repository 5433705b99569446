"""The API server's ClusterIP allocator: each Service that is not headless gets a virtual IP from the service CIDR when
it is created, and one it asks for is checked against that range and against the addresses already taken.

Emulated from kubernetes/kubernetes:
- pkg/registry/core/service/storage/alloc.go @b0d609f0 (`allocIPs`): a Service of type ClusterIP, NodePort or
  LoadBalancer without `spec.clusterIP` gets the allocator's next address; one given is allocated as given, and a
  refusal is the field error `spec.clusterIPs: Invalid value: []string{"<ip>"}: failed to allocate IP <ip>: <why>`;
  `clusterIP: None` is a headless Service, which gets none, and so does an ExternalName Service;
- pkg/registry/core/service/ipallocator/interfaces.go @78fc8e44: the reasons, "the provided IP (<ip>) is not in the
  valid range. The range of valid IPs is <cidr>" and "provided IP is already allocated";
- pkg/registry/core/service/ipallocator/bitmap.go: the range holds neither the network's address nor (IPv4) its
  broadcast address; its lowest min(max(16, size/16), 256) addresses are kept for Services that ask for one, and the
  allocator's own choices are taken from above them while any is free (KEP-3070);
- pkg/apis/core/validation/validation.go ValidateService: a `clusterIP` that is neither "", "None" nor an IP address is
  invalid, and `clusterIPs[0]` must match `clusterIP` where both are given.

The range is kubeadm's default `--service-cluster-ip-range`, 10.96.0.0/12 (kubeadm's `DefaultServicesSubnet`); its
first address, 10.96.0.1, is the `kubernetes` Service's on such a cluster, so no other Service gets it. The API
server's own choice is random; here it is a hash of the Service's namespace and name into the upper band, the next free
address after it where taken: the same inputs give the same addresses, and nothing a pod does can tell the two apart.
Not emulated: IPv6 and dual-stack Services (`ipFamilies`), ServiceCIDR objects (MultiCIDRServiceAllocator), and
changing a stored Service's address on update (it keeps the one it has).
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import Any

from jaxinfra.admission.store import Finding, Store, meta, namespace_of
from jaxinfra.admission.validation.messages import Raw, invalid_value

SERVICE_CIDR = ipaddress.IPv4Network("10.96.0.0/12")
"""The service CIDR: kubeadm's default --service-cluster-ip-range (cmd/kubeadm/app/apis/kubeadm/v1beta4
DefaultServicesSubnet)."""
KUBERNETES_SERVICE_IP = SERVICE_CIDR.network_address + 1
"""The `kubernetes` Service's address: the first of the range (pkg/controlplane/services.go ServiceIPRange)."""
HEADLESS = "None"
VALID_IP = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
ALLOCATED = "provided IP is already allocated"
_FIX_RANGE = f"leave spec.clusterIP out (the API server picks one), or choose one in {SERVICE_CIDR}"
_FIX_TAKEN = "leave spec.clusterIP out (the API server picks a free one), or choose another address"


def static_band(cidr: ipaddress.IPv4Network = SERVICE_CIDR) -> int:
    """How many of the range's lowest addresses are kept for Services that ask for them (bitmap.go
    calculateRangeOffset: min(max(16, size / 16), 256))."""
    return min(max(16, cidr.num_addresses // 16), 256)


def wants_ip(spec: Mapping) -> bool:
    """Whether a Service with this spec gets a cluster IP: any type but ExternalName, unless it is headless."""
    return spec.get("type", "ClusterIP") != "ExternalName" and spec.get("clusterIP") != HEADLESS


def cluster_ips(svc: Mapping) -> tuple[ipaddress.IPv4Address, ...]:
    """The address a stored Service holds, as the store's index of Services by address files it (none when headless
    or not IPv4)."""
    spec = svc.get("spec")
    ip = spec.get("clusterIP") if isinstance(spec, Mapping) else None
    if isinstance(ip, str):
        try:
            return (ipaddress.IPv4Address(ip),)
        except ValueError:
            pass
    return ()


@dataclass(frozen=True)
class Taken(Container[ipaddress.IPv4Address]):
    """The addresses the stored Services hold (the one named `namespace/name` aside), and the `kubernetes` Service's:
    each a lookup in the store's index by address (the allocator's bitmap, bitmap.go Has), never a pass over every
    Service."""

    store: Store
    namespace: str
    name: str

    def __contains__(self, ip: object) -> bool:
        if ip == KUBERNETES_SERVICE_IP:
            return True
        return any(
            (namespace_of(svc), meta(svc).get("name")) != (self.namespace, self.name)
            for svc in self.store.by_index("Service", cluster_ips, ip)
        )


def choose(namespace: str, name: str, used: Container[ipaddress.IPv4Address]) -> ipaddress.IPv4Address | None:
    """The allocator's own choice for `namespace/name`: from the upper band while it has a free address, else the
    lower; None when the range is full."""
    first, size = int(SERVICE_CIDR.network_address) + 1, SERVICE_CIDR.num_addresses - 2  # no network, no broadcast
    band = static_band()
    digest = int.from_bytes(hashlib.sha256(f"{namespace}/{name}".encode()).digest()[:8], "big")
    for low, count in ((band, size - band), (0, band)):
        start = digest % count
        for step in range(count):
            ip = ipaddress.IPv4Address(first + low + (start + step) % count)
            if ip not in used:
                return ip
    return None


def allocate(obj: dict[str, Any], store: Store) -> list[Finding]:
    """Give the Service `obj` its cluster IP as the API server stores it (`spec.clusterIP` and `spec.clusterIPs`), or
    the findings that refuse it. A Service stored before under the same name keeps its address."""
    spec = obj.get("spec")
    if obj.get("kind") != "Service" or not isinstance(spec, dict) or not wants_ip(spec):
        return []
    namespace, name = namespace_of(obj), str(meta(obj).get("name", ""))
    given, ips = spec.get("clusterIP"), spec.get("clusterIPs")
    if not given and isinstance(ips, list) and ips and isinstance(ips[0], str):
        given = ips[0]
    if isinstance(ips, list) and ips and spec.get("clusterIP") and ips[0] != spec["clusterIP"]:
        return [
            invalid_value(
                ("spec", "clusterIPs"),
                Raw(_go_strings(ips)),
                "first value must match `clusterIP`",
                "give clusterIPs[0] the value of clusterIP, or leave clusterIPs out",
            )
        ]
    if not given:
        before = store.get("Service", namespace, name)
        kept = (before or {}).get("spec", {}).get("clusterIP") if before else None
        ip = ipaddress.IPv4Address(kept) if is_ipv4(kept) else choose(namespace, name, Taken(store, namespace, name))
        if ip is None:
            return [Finding(("spec", "clusterIPs"), None, "failed to allocate a serviceIP: range is full", _FIX_TAKEN)]
        spec["clusterIP"], spec["clusterIPs"] = str(ip), [str(ip)]
        return []
    if not isinstance(given, str) or not _is_ip(given):
        return [invalid_value(("spec", "clusterIPs", 0), given, VALID_IP, _FIX_RANGE)]
    where, shown = ("spec", "clusterIPs"), Raw(_go_strings([given]))
    parsed = ipaddress.ip_address(given)
    if not isinstance(parsed, ipaddress.IPv4Address) or int(parsed) not in _range():
        why = f"the provided IP ({given}) is not in the valid range. The range of valid IPs is {SERVICE_CIDR}"
        return [invalid_value(where, shown, f"failed to allocate IP {given}: {why}", _FIX_RANGE)]
    if parsed in Taken(store, namespace, name):
        return [invalid_value(where, shown, f"failed to allocate IP {given}: {ALLOCATED}", _FIX_TAKEN)]
    spec["clusterIP"], spec["clusterIPs"] = given, [given]
    return []


def _range() -> range:
    """The addresses the allocator hands out, as integers: the CIDR less its network and broadcast addresses."""
    return range(int(SERVICE_CIDR.network_address) + 1, int(SERVICE_CIDR.broadcast_address))


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def is_ipv4(value: object) -> bool:
    """Whether `value` is an IPv4 address written as text (the simulator's kube-proxy serves only those)."""
    return isinstance(value, str) and _is_ip(value) and ipaddress.ip_address(value).version == 4


def _go_strings(values: list[Any]) -> str:
    """A []string as Go's %#v prints it in a field error."""
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"
