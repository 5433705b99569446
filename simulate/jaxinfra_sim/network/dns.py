"""Cluster DNS: which names the Services make resolvable (kube-dns), and what
each simulated pod's /etc/hosts holds: the kubelet's file for it, plus those names.

On a cluster a pod resolves names two ways: its /etc/hosts, which the kubelet writes (localhost,
its own name and spec.hostAliases; pkg/kubelet/kubelet_pods.go managedHostsFileContent, shown in
the Kubernetes docs "Adding entries to Pod /etc/hosts with HostAliases"), and the cluster DNS
(kube-dns) for Services and pods under headless Services. Here the second is written into the
same file, holding exactly the names the manifests make resolvable, so any other name fails to
resolve, as on a cluster. `sandbox.enter` bind-mounts the file over the pod's /etc/hosts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from jaxinfra.errors import Problem
from jaxinfra_sim.core import model
from jaxinfra_sim.core.inputs import Service

CLUSTER_DOMAIN = "cluster.local"

KUBELET_HEADER = (
    "# Kubernetes-managed hosts file.\n"
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)
"""The boilerplate the kubelet writes at the top of every pod's hosts file."""


def _node_file() -> str:
    """A host-network pod gets its node's own /etc/hosts; the simulated node is this machine."""
    path = Path("/etc/hosts")
    text = path.read_text(encoding="utf-8") if path.exists() else "127.0.0.1\tlocalhost\n"
    return text if text.endswith("\n") else text + "\n"


def hosts_file(pod: model.Pod, records: Mapping[str, str]) -> str:
    """The pod's /etc/hosts: the kubelet's part for this pod, then the cluster DNS records (name -> ip)."""
    if pod.host_network:  # the node's file and the node's name (its address is the pod's here)
        lines = [_node_file(), f"{pod.ip}\t{pod.node}\n"]
    elif pod.subdomain:
        lines = [
            KUBELET_HEADER,
            f"{pod.ip}\t{pod.hostname}.{pod.subdomain}.{pod.namespace}.svc.{CLUSTER_DOMAIN}\t{pod.hostname}\n",
        ]
    else:
        lines = [KUBELET_HEADER, f"{pod.ip}\t{pod.hostname}\n"]
    if pod.host_aliases:
        lines.append("\n# Entries added by HostAliases.\n")
        lines += [f"{ip}\t{chr(9).join(names)}\n" for ip, names in pod.host_aliases]
    lines.append("# jaxinfra simulate: the cluster DNS (kube-dns on a cluster)\n")
    lines += [f"{ip}\t{name}\n" for name, ip in sorted(records.items())]
    return "".join(lines)


def uts_hostname(pod: model.Pod) -> str:
    """The hostname the pod's processes see: a host-network pod shares its node's."""
    return pod.node if pod.host_network else pod.hostname


def search(name: str, namespace: str) -> list[str]:
    """The names a pod's resolver tries: its search path (ns.svc, svc, cluster domain), then the name itself."""
    if name.endswith("."):
        return [name[:-1]]
    return [
        f"{name}.{namespace}.svc.{CLUSTER_DOMAIN}",
        f"{name}.svc.{CLUSTER_DOMAIN}",
        f"{name}.{CLUSTER_DOMAIN}",
        name,
    ]


class ClusterDns:
    """Cluster DNS. For headless Services: `<host>.<svc>.<ns>.svc.cluster.local` per selected pod whose hostname is set
    and subdomain == svc, and `<svc>.<ns>.svc.cluster.local` -> the first selected pod (kube-dns returns them all). For
    a Service with a cluster IP: `<svc>.<ns>.svc.cluster.local` -> that virtual IP, its one A record, and no pod
    records (kube-dns: kubernetes/dns pkg/dns/dns.go newPortalService), whether or not it has endpoints; what
    answers there is kube-proxy's (`kubeproxy`)."""

    def __init__(self, services: Iterable[Service], pods: Sequence[model.Pod]):
        self.records: dict[str, tuple[str, Service]] = {}
        self.hosts: dict[str, str] = {}
        self.findings = model.Findings("name")
        self.by_ip = {p.ip: p for p in pods}
        self.by_host: dict[tuple[str, str], model.Pod] = {}
        for p in pods:
            self.by_host.setdefault((p.namespace, p.hostname), p)
        by_ns: dict[str, list[model.Pod]] = {}
        for p in pods:
            by_ns.setdefault(p.namespace, []).append(p)
        for svc in services:
            if svc.cluster_ip is not None:  # its virtual IP, one A record, whatever its endpoints (`kubeproxy`)
                self._add(f"{svc.name}.{svc.namespace}.svc.{CLUSTER_DOMAIN}", svc.cluster_ip, svc)
                continue
            if not svc.headless:
                continue
            selected = [p for p in by_ns.get(svc.namespace, ()) if svc.selects(p)]
            if selected:
                self._add(f"{svc.name}.{svc.namespace}.svc.{CLUSTER_DOMAIN}", selected[0].ip, svc)
            for p in selected:
                if p.subdomain == svc.name:
                    self._add(f"{p.hostname}.{svc.name}.{svc.namespace}.svc.{CLUSTER_DOMAIN}", p.ip, svc)
        self.hosts = dict(sorted(self.hosts.items()))

    def _add(self, fqdn: str, ip: str, svc: Service) -> None:
        if fqdn in self.records:
            first = self.records[fqdn][0]
            if first != ip:
                self.findings.add(
                    f"dup|{svc.origin}",
                    lambda: Problem(
                        svc.origin,
                        fqdn,
                        f"two pods share the DNS name {fqdn}; it resolves to the first, {first}",
                        "give the workloads distinct names so their pod hostnames differ",
                    ),
                )
            return
        self.records[fqdn] = (ip, svc)
        short = fqdn[: -len(f".svc.{CLUSTER_DOMAIN}")]  # <host>.<svc>.<ns> or <svc>.<ns>
        rel_own_ns = short.rsplit(".", 1)[0]  # only resolvable from inside the namespace
        for name in (fqdn, f"{short}.svc", short, rel_own_ns):
            owner = self.hosts.setdefault(name, ip)
            if owner != ip:
                self.findings.add(
                    f"relative|{svc.origin}",
                    lambda n=name, o=owner: Problem(  # type: ignore[misc]  # python/mypy#15459
                        svc.origin,
                        n,
                        f"the relative name {n} means different pods in different namespaces; "
                        f"/etc/hosts keeps the first, {o}",
                        f"use the fully qualified name ({n}.<namespace>.svc.{CLUSTER_DOMAIN} form) "
                        "or distinct Service names",
                    ),
                )

    def resolve(self, name: str, namespace: str) -> tuple[str, Service] | None:
        for candidate in search(name, namespace):
            if candidate in self.records:
                return self.records[candidate]
        return None


class LiveRecords(Mapping[str, str]):
    """The cluster DNS records (name -> ip) as they change while the workloads of one cluster run side by side: a pod's
    hosts file is written with the records of the moment (`hosts_file`), and rewritten in place (the same file, which
    its container sees through its bind mount) whenever a workload's pods come or go, as kube-dns answers from the
    endpoints of the moment: a pod started before its server's pods resolves their names once they exist."""

    def __init__(self) -> None:
        self._records: dict[str, str] = {}
        self._files: dict[Path, model.Pod] = {}

    def __getitem__(self, name: str) -> str:
        return self._records[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def track(self, pod: model.Pod, path: Path) -> None:
        """`path` is `pod`'s hosts file, written with these records: rewrite it as they change."""
        self._files[path] = pod

    def forget(self, under: Path) -> None:
        """The hosts files under `under` (an ended attempt's) are no longer rewritten."""
        self._files = {path: pod for path, pod in self._files.items() if not path.is_relative_to(under)}

    def update(self, records: Mapping[str, str]) -> None:
        """The records now; every tracked hosts file that still exists is rewritten when they changed."""
        if dict(records) == self._records:
            return
        self._records = dict(records)
        for path, pod in self._files.items():
            with contextlib.suppress(FileNotFoundError):
                with path.open("r+", encoding="utf-8") as f:  # in place: the bind mount holds this inode
                    f.write(hosts_file(pod, self._records))
                    f.truncate()
