"""The network of each pod of an attempt (`pod_workers`), as the kubelet's sandbox holds it: made as the pod begins
(RunPodSandbox, before any of its containers), let go a while after its last container ended (StopPodSandbox), and
the Services' endpoints that kube-proxy is handed while the pods live.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from jaxinfra_sim.core.errors import NetworkError
from jaxinfra_sim.core.podrun import PodRun
from jaxinfra_sim.network import kubeproxy
from jaxinfra_sim.network.netns import PodNetwork
from jaxinfra_sim.node.node import Node

if TYPE_CHECKING:
    from jaxinfra_sim.network.netns import HostAddress

#: How long an ended pod's network outlives its last container: the kubelet sees the exit at its next PLEG relist
#: (every second: kubernetes pkg/kubelet/kubelet.go genericPlegRelistPeriod), then its pod worker stops the terminal
#: pod's sandbox (SyncTerminatingPod, StopPodSandbox, whose CNI DEL releases the address). Until then its address still
#: answers, as on a node: a peer's retry loop that sleeps a second between pings still reaches a pod that just ended.
SANDBOX_TEARDOWN_S = 2.0


class PodNetworks:
    """Each begun pod's own network namespace (a host-network pod's address), by id() of its run, on `node`'s network
    (none: no pod network here); `proxy`: the simulation's kube-proxy (None: no Service has a cluster IP); `workload`:
    the workload's id, whose endpoints it syncs; `serial`: the workload's number in the simulation."""

    def __init__(self, node: Node | None, proxy: kubeproxy.Proxy | None, workload: str, serial: int) -> None:
        self.node = node
        self.proxy = proxy
        self.workload = workload
        self.serial = serial
        self.networks: dict[int, PodNetwork | HostAddress] = {}
        self.teardowns: dict[int, float] = {}  # when an ended pod's network goes (monotonic), by id() of its run

    def get(self, r: PodRun) -> PodNetwork | HostAddress | None:
        return self.networks.get(id(r))

    def __contains__(self, r: PodRun) -> bool:
        return id(r) in self.networks

    def descriptors(self, keep: object = None) -> list[int]:
        """The namespaces' descriptors but `keep`'s, the one a pod being forked joins."""
        return [n.fileno() for n in self.networks.values() if n is not keep and n.fileno() >= 0]

    def begin(self, r: PodRun, attempt: int) -> None:
        """Ask for the pod's own network namespace as its pod begins (the kubelet's RunPodSandbox, before any of its
        containers): the holder makes every begun pod's at once, and its first container waits for it (the runner's
        `_start`). A host-network pod stays in the simulation's namespace, the node's. Named for the plugins by numbers
        only."""
        network = self.node.network if self.node is not None else None
        if network is None or id(r) in self.networks:
            return
        if r.pod.host_network:  # its node's namespace, where it listens on its own address
            self.networks[id(r)] = network.host_address(r.pod.ip)
            return
        sandbox_id = f"jaxinfra-{os.getpid()}-{self.serial}-{attempt}-{r.pod.global_index}-{r.generation}"
        self.networks[id(r)] = network.pod(r.pod.ip, sandbox_id)

    def release(self, runs: list[PodRun], now: float) -> None:
        """Let an ended pod's namespace go `SANDBOX_TEARDOWN_S` after every process of it is reaped (the kubelet's
        StopPodSandbox): its veth and its route go with it, and a pod created in its place may take its address."""
        for r in runs:
            if not (r.done and id(r) in self.networks and all(p.pid is None or p.reaped for p in r.processes)):
                continue
            due = self.teardowns.setdefault(id(r), now + SANDBOX_TEARDOWN_S)
            if now >= due:
                self.networks.pop(id(r)).close()

    def kube_proxy(self, runs: list[PodRun], now: float, wake: list[float], ready: Callable[[PodRun], bool]) -> None:
        """The Services' endpoints as the EndpointSlice controller keeps them (each pod with an address that is not
        terminal: Ready or not, being stopped or not), handed to kube-proxy, which syncs its rules when they changed
        (`kubeproxy.Proxy`: at its rate; the loop wakes when the next sync is due)."""
        if self.proxy is None:
            return
        endpoints = [
            kubeproxy.Endpoint(r.pod, ready(r), terminating=r.preempted is not None)  # deleted: terminating
            for r in runs
            if r.begun and not r.done and id(r) in self.networks
        ]
        due = self.proxy.sync(now, endpoints, self.workload)
        if due is not None:
            wake.append(due)

    def close(self) -> None:
        """Let every pod's network go, its pods no Service's endpoints any more."""
        for net in self.networks.values():
            net.close()
        self.networks.clear()
        if self.proxy is not None:  # its pods are no Service's endpoints any more
            with contextlib.suppress(NetworkError):  # (the network itself gone: nothing answers them either)
                self.proxy.sync(time.monotonic(), (), self.workload)
