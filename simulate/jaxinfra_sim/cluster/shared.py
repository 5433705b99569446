"""What the workloads of one simulation share while they run side by side: its options, where its pods live, the API
server, the node (cgroups and pod network), kube-proxy, and the cluster objects every workload sees at once — the DNS
records of every live pod of its cluster and the NetworkPolicy ruleset compiled over every live pod of every cluster.

On a cluster every applied workload runs at once, and a Service's name resolves to whichever pods exist now, and a
NetworkPolicy selects pods by label across Jobs and namespaces. So the records and the ruleset are recomputed here each
time a workload's attempt starts or ends (`attach`, `detach`), over the pods then alive.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxinfra_sim.core import model, paths
from jaxinfra_sim.core.options import Options
from jaxinfra_sim.core.podrun import Listener
from jaxinfra_sim.kubelet.container import Credentials
from jaxinfra_sim.network import dns, kubeproxy, netpol
from jaxinfra_sim.node.node import Node

if TYPE_CHECKING:
    from jaxinfra_sim.apiserver.server import ApiServer

#: Each attempt's pods get fresh IPs (as recreated pods do): blocks of 40 x 250 addresses.
IP_BLOCK = 40
IP_BLOCKS = 6


@dataclass
class LiveCluster:
    """One cluster (all the YAML, or one stack) while its workloads run: the pods of each live attempt, by workload id,
    and the DNS records every pod of it reads."""

    manifests: Sequence[Mapping[str, Any]]
    # the records its Services make of the live pods (`model.EmulatedCluster.records_of`), once an attempt began
    records_of: Callable[[Sequence[model.Pod]], Mapping[str, str]] | None = None
    pods: dict[str, tuple[model.Pod, ...]] = field(default_factory=dict)
    records: dns.LiveRecords = field(default_factory=dns.LiveRecords)

    def live_pods(self) -> list[model.Pod]:
        return [p for pods in self.pods.values() for p in pods]


@dataclass
class Simulation:
    """What the workloads of one simulation share: its options, where its pods live, their addresses, the API server,
    the clusters' live objects."""

    options: Options
    listener: Listener
    isolation: str  # the sandbox strategy that works here
    tmp: Path
    deadline: float
    seed: int  # names the simulation's cgroups: concurrent simulations use other ones
    api: tuple[str, int]  # the API server's address, which every pod's env names
    credentials: Credentials | None = None  # tokens and CA for pods that mount a ServiceAccount token
    server: ApiServer | None = None
    node: Node | None = None  # the cgroups and pod network its pods share
    started: float = 0.0  # when the simulation began (monotonic): attempts' start times count from it
    blocks: Iterator[int] = field(default_factory=itertools.count)
    clusters: dict[int, LiveCluster] = field(default_factory=dict)  # by id() of the cluster's manifests
    proxy: kubeproxy.Proxy | None = None  # kube-proxy, for every Service with a cluster IP among the inputs
    rules: str | None = None  # the NetworkPolicy ruleset loaded in the pods' network
    # each running attempt's descriptors that no pod may keep open (`pod_workers.Runner.descriptors`), by workload id
    descriptors: dict[str, Callable[[], list[int]]] = field(default_factory=dict)

    def ip_block(self) -> int:
        """Addresses of their own for the next pods that are created (`control_plane._ip`)."""
        return next(self.blocks) % IP_BLOCKS * IP_BLOCK

    def in_use(self) -> set[str]:
        """Every live pod's address, of every cluster."""
        return {p.ip for c in self.clusters.values() for p in c.live_pods()}

    def cluster(self, manifests: Sequence[Mapping[str, Any]]) -> LiveCluster:
        return self.clusters.setdefault(id(manifests), LiveCluster(manifests))

    def records(self, manifests: Sequence[Mapping[str, Any]]) -> dns.LiveRecords:
        """The DNS records the pods of this cluster read, kept up to date while they run."""
        return self.cluster(manifests).records

    def attach(
        self,
        manifests: Sequence[Mapping[str, Any]],
        workload: str,
        pods: Sequence[model.Pod],
        records_of: Callable[[Sequence[model.Pod]], Mapping[str, str]] | None,
        descriptors: Callable[[], list[int]],
    ) -> None:
        """An attempt of `workload` begins with `pods`: the cluster's DNS and every cluster's policies see them, and
        the pods of the others never keep its `descriptors` open."""
        self.descriptors[workload] = descriptors
        cluster = self.cluster(manifests)
        cluster.records_of = records_of
        cluster.pods[workload] = tuple(pods)
        self._changed(cluster)

    def detach(self, manifests: Sequence[Mapping[str, Any]], workload: str, workdir: Path) -> None:
        """An attempt of `workload` has ended (its pods and their networks are gone): nothing resolves to them, no
        policy selects them, and its hosts files (under `workdir`) are no longer rewritten."""
        self.descriptors.pop(workload, None)
        cluster = self.cluster(manifests)
        cluster.pods.pop(workload, None)
        cluster.records.forget(workdir)
        self._changed(cluster)

    def beside(self, workload: str) -> list[int]:
        """The descriptors of the attempts running beside `workload`'s, which its pods must close."""
        return [fd for other, of in self.descriptors.items() if other != workload for fd in of()]

    def _changed(self, cluster: LiveCluster) -> None:
        if cluster.records_of is not None:
            cluster.records.update(cluster.records_of(cluster.live_pods()))
        if self.node is not None and self.node.network is not None:
            ruleset = netpol.merged([netpol.of_manifests(c.manifests, c.live_pods()) for c in self.clusters.values()])
            if ruleset != self.rules:  # (no policy selects a pod: the same table whichever pods live)
                self.node.network.load_rules(ruleset)
                self.rules = ruleset

    def storage(self, mount: model.Mount) -> Path:
        """Where a claim or a bucket keeps its data: the folder --volume names, else one for the whole simulation;
        where a hostPath is: the folder (or file) --host-path names, else its path in its node's own folder (one per
        simulated node, empty at first: never this machine's path)."""
        if mount.kind == "hostPath":
            node = self.tmp / "nodes" / paths.safe_name(mount.node)
            return self.options.host_paths.get(mount.key) or paths.on_node(node, mount.key, f"volume {mount.volume}")
        return self.options.volumes.get(mount.key) or self.tmp / f"{mount.kind}s" / paths.safe_name(mount.key)
