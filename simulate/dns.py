"""What each simulated pod's /etc/hosts holds: the kubelet's file for it, plus the cluster's DNS.

On a cluster a pod resolves names two ways: its /etc/hosts, which the kubelet writes (localhost,
its own name and spec.hostAliases; pkg/kubelet/kubelet_pods.go managedHostsFileContent, shown in
the Kubernetes docs "Adding entries to Pod /etc/hosts with HostAliases"), and the cluster DNS
(kube-dns) for Services and pods under headless Services. Here the second is written into the
same file, holding exactly the names the manifests make resolvable, so any other name fails to
resolve, as on a cluster. `sandbox.enter` bind-mounts the file over the pod's /etc/hosts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from jaxinfra.simulate import model

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
    if pod.host_network:   # the node's file and the node's name (its address is the pod's here)
        lines = [_node_file(), f"{pod.ip}\t{pod.node}\n"]
    elif pod.subdomain:
        lines = [KUBELET_HEADER, f"{pod.ip}\t{pod.hostname}.{pod.subdomain}.{pod.namespace}.svc.{CLUSTER_DOMAIN}\t{pod.hostname}\n"]
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
