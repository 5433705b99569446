"""The node a simulation's pods share on this machine: the kernel's memory and CPU controller
groups that enforce their limits and see their OOM kills (`cgroups`), and the pod network they listen on (`netns`).

Made once per simulation, before any pod starts, and closed after the last one, whatever happens;
what this machine does not allow (no delegated controller, no user-mode network stack) becomes a
note in the report instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jaxinfra_sim import cgroups, model

if TYPE_CHECKING:
    from jaxinfra_sim.netns import Network


@dataclass
class Node:
    """What every pod of one simulation shares."""

    groups: cgroups.Session | None = None
    network: Network | None = None  # the pods' network namespace
    notes: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, name: str, limited: bool) -> Node:
        """`limited`: some pod has a memory or CPU limit (only then is what this machine does not enforce a note).
        Groups are made either way: every pod's memory group tells whose process an OOM killer ended."""
        node = cls()
        try:
            node.groups = cgroups.Session.create(name)
            if limited:
                node.notes += node.groups.controllers.unenforced()
            from jaxinfra_sim import netns

            node.network = netns.Network.create()
            if node.network.egress_note:
                node.notes.append(node.network.egress_note)
        except BaseException:
            node.close()
            raise
        return node

    def cgroup(self, pod: model.Pod, attempt: int, slot: int = 0) -> cgroups.PodGroup | None:
        """The group enforcing the limits of this pod's container (`slot` 0: its JAX container's, else its other
        container's at that place) in this attempt, and watching its OOM kills (a memory group without a limit
        for a container without one), where this machine allows it."""
        if self.groups is None:
            return None
        name = f"{attempt}-{pod.global_index}" + (f"-{slot}" if slot else "")
        return self.groups.pod(name, pod.memory_limit, pod.cpu_millis, watch=True)

    def connect(self, ip: str, port: int) -> bool:
        """Whether something listens at ip:port, seen from inside the pod network."""
        if self.network is not None:
            return bool(self.network.connect_check(ip, port, 0.05))
        import socket

        with socket.socket() as probe:
            return probe.connect_ex((ip, port)) == 0

    def close(self) -> None:
        for part in (self.groups, self.network):
            if part is not None:
                part.close()
