"""A workload's coordinator name as its pods resolve it against the emulated DNS (`dns`), and, where it does not
resolve, why: the Service, subdomain, hostname or selector to fix (`contract` checks the coordinator with these).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Mapping, Sequence

from jaxinfra.upstream import JOB_NAME_LABEL, JOBSET_NAME_LABEL
from jaxinfra_sim.core import model
from jaxinfra_sim.core.inputs import Service
from jaxinfra_sim.network.dns import CLUSTER_DOMAIN, ClusterDns


def fqdn(pod: model.Pod) -> str:
    """The pod's name under its Service: <hostname>.<subdomain>, or its hostname alone without one."""
    return f"{pod.hostname}.{pod.subdomain}" if pod.subdomain else pod.hostname


class Resolution:
    """The names of workload `wl_id`'s `pods` against `dns`; `namespaces`: the cluster's; `services`: its Services by
    (namespace, name)."""

    def __init__(
        self,
        wl_id: str,
        pods: Sequence[model.Pod],
        dns: ClusterDns,
        namespaces: Collection[str],
        services: Mapping[tuple[str, str], Service],
    ) -> None:
        self.id, self.pods, self.dns, self.namespaces, self.services = wl_id, pods, dns, namespaces, services

    def resolve(self, pod: model.Pod, host: str) -> tuple[str | None, Service | None]:
        """What `host` resolves to from `pod`: a headless Service's pod (its address, the Service), a literal address
        (loopback: the pod's own), else (None, None)."""
        found = self.dns.resolve(host, pod.namespace)
        if found and found[1].headless:
            return found
        if found:  # a virtual IP: `diagnose` says why the coordinator wants a headless Service's pod name instead
            return None, None
        if host == "localhost":
            return pod.ip, None
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            return None, None
        return (pod.ip if literal.is_loopback else str(literal)), None

    def diagnose(self, host: str, pod: model.Pod, rank0: model.Pod) -> tuple[str, str]:
        """Why a name does not resolve from `pod`: the Service, subdomain, hostname or selector to fix (`rank0`: the pod
        that hosts the coordinator)."""
        labels = host.rstrip(".").split(".")
        for suffix in (["svc", *CLUSTER_DOMAIN.split(".")], ["svc"]):
            if len(labels) > len(suffix) and labels[-len(suffix) :] == suffix:
                labels = labels[: -len(suffix)]
                break
        named: tuple[str | None, str, str]  # (hostname, Service, namespace)
        if len(labels) == 2 and labels[1] in self.namespaces and (pod.namespace, labels[1]) not in self.services:
            named = (None, labels[0], labels[1])  # <svc>.<ns>
        elif len(labels) == 2:
            named = (labels[0], labels[1], pod.namespace)  # <host>.<svc>
        elif len(labels) == 1:
            named = (None, labels[0], pod.namespace)  # <svc>
        elif len(labels) == 3:
            named = (labels[0], labels[1], labels[2])
        else:
            return (
                f"expected <hostname>.<service> (optionally .<namespace>.svc.{CLUSTER_DOMAIN})",
                f"use {fqdn(rank0)}",
            )
        hostname, svc_name, ns = named
        svc = self.services.get((ns, svc_name))
        if svc is None:
            return self._no_service(svc_name, ns, rank0)
        if not svc.headless:
            return (
                f"Service '{svc_name}' ({svc.origin}) is not headless, so pods get no DNS names under it",
                f"set clusterIP: None on Service '{svc_name}'",
            )
        target = self.dns.by_host.get((ns, hostname)) if hostname else rank0
        if target is None:
            return (
                f"no pod in namespace '{ns}' has hostname '{hostname}' (this workload's pods are "
                f"{self.pods[0].hostname} … {self.pods[-1].hostname})",
                f"use rank 0's hostname: {fqdn(rank0)}",
            )
        if hostname and target.subdomain != svc_name:
            now = f"subdomain '{target.subdomain}', not '{svc_name}'" if target.subdomain else "no subdomain"
            fix = (
                "set spec.network.enableDNSHostnames: true (the JobSet sets subdomain on its pods)"
                if target.workload.startswith(("JobSet/", "TrainJob/"))
                else f"set spec.template.spec.subdomain: {svc_name}"
            )
            return f"pod '{hostname}' has {now}, so it gets no DNS name under Service '{svc_name}'", fix
        if not svc.selects(target):
            return selector_mismatch(svc, target)
        return f"Service '{svc_name}' selects no pod named '{hostname}'", f"use {fqdn(rank0)}"

    def _no_service(self, svc_name: str, ns: str, rank0: model.Pod) -> tuple[str, str]:
        jobset = self.id.startswith(("JobSet/", "TrainJob/"))
        others = sorted(n for (n_ns, n) in self.services if n_ns == ns)
        message = f"no Service named '{svc_name}' in namespace '{ns}'" + (
            f" (Services there: {', '.join(others)})" if others else ""
        )
        if rank0.subdomain is None and jobset:
            return (
                f"{message}; the JobSet has spec.network.enableDNSHostnames: false, "
                "so it creates no Service and its pods have no subdomain",
                "set spec.network.enableDNSHostnames: true",
            )
        fix = (
            f"add a headless Service '{svc_name}' (clusterIP: None, publishNotReadyAddresses: true) "
            f"in namespace '{ns}' selecting the pods"
        )
        if rank0.subdomain is None:
            return (
                f"{message}, and the pods have no subdomain",
                f"{fix}, and set spec.template.spec.subdomain: {svc_name}",
            )
        if rank0.subdomain != svc_name:
            return (
                f"{message}; the pods' subdomain is '{rank0.subdomain}'",
                f"address rank 0 as {fqdn(rank0)}, or {fix}",
            )
        return message, fix


def selector_mismatch(svc: Service, pod: model.Pod) -> tuple[str, str]:
    """Why `svc` does not select `pod`, and the selector that would."""
    key = JOBSET_NAME_LABEL if JOBSET_NAME_LABEL in pod.labels else JOB_NAME_LABEL
    suggestion = f"{{{key}: {pod.labels[key]}}}"
    if not svc.selector:
        return (
            f"Service '{svc.name}' has no selector, so it selects no pods",
            f"set spec.selector on Service '{svc.name}' to {suggestion}",
        )
    diff = ", ".join(
        f"{k}: {v!r} vs pod's {pod.labels.get(k, '<absent>')!r}"
        for k, v in svc.selector.items()
        if pod.labels.get(k) != v
    )
    return (
        f"Service '{svc.name}' selector {dict(svc.selector)} does not select pod '{pod.hostname}' ({diff})",
        f"set the Service selector to {suggestion}",
    )
