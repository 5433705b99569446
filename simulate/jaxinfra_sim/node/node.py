"""The node a simulation's pods share on this machine: the kernel's memory, CPU and pids controller
groups that enforce their limits and see their OOM kills (`cgroups`), and the pod network they listen on (`netns`).

Made once per simulation, before any pod starts, and closed after the last one, whatever happens;
what this machine does not allow (no delegated controller, no user-mode network stack) becomes a
note in the report instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from jaxinfra_sim.core import model
from jaxinfra_sim.node import capacity, cgroups

if TYPE_CHECKING:
    from jaxinfra_sim.network.netns import Network


def _nproc(note: str) -> str:
    """Where no pids group can be had, each container's own RLIMIT_NPROC stands in (`Node.nproc`): the note says so."""
    head = "pids limits not enforced: "
    if not note.startswith(head):
        return note
    return (
        f"pids limits enforced by RLIMIT_NPROC ({capacity.POD_PIDS_LIMIT} tasks, counted in each container's own "
        f"user namespace), not by a pids cgroup: {note.removeprefix(head)}"
    )


class Root:
    """The node's root folder (the kubelet's --root-dir, the runtime's state: the simulation's temp folder), its
    identity (device, inode) taken at the start, with a mark made in it: `gone` says, as the machine's verdict, that
    something on this machine removed it while the simulation ran (a temp cleaner, a CI runner's clean-up), which no
    pod survives. No descriptor of it is held: a pod forked from the simulator must not inherit a way into the
    machine's folders."""

    MARK = ".jaxinfra-node"

    def __init__(self, path: Path):
        self.path = path
        (path / self.MARK).touch(mode=0o600, exist_ok=False)
        held = os.stat(path)
        self._identity = (held.st_dev, held.st_ino)

    def gone(self) -> str | None:
        """The machine's verdict where the folder, or its mark, is no longer there (or another folder took its name);
        None while it is."""
        try:
            now = os.stat(self.path)
            intact = (now.st_dev, now.st_ino) == self._identity and os.path.lexists(self.path / self.MARK)
        except OSError:
            intact = False
        if intact:
            return None
        return (
            f"the simulation's folder {self.path} was removed while it ran (by something else on this machine: a temp "
            "cleaner such as systemd-tmpfiles or tmpreaper, a CI runner's clean-up), and its pods' files with it; "
            "fix: leave it until jaxinfra simulate ends, or set TMPDIR to a folder no cleaner touches"
        )


@dataclass
class Node:
    """What every pod of one simulation shares."""

    groups: cgroups.Session | None = None
    network: Network | None = None  # the pods' network namespace
    root: Root | None = None  # its folder, watched
    notes: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, name: str, limited: bool, egress: bool = True, root: Path | None = None) -> Node:
        """`limited`: some pod has a memory or CPU limit (only then is what this machine does not enforce of those a
        note; the per-pod process limit, every pod's, is a note whenever it is not enforced). Groups are made either
        way: every pod's memory group tells whose process an OOM killer ended. `egress`: the pods may reach beyond the
        simulation (`netns.Network.create`). `root`: the simulation's folder, watched (`Root`)."""
        node = cls()
        try:
            node.root = Root(root) if root is not None else None
            node.groups = cgroups.Session.create(name)
            node.notes += [_nproc(n) for n in node.groups.controllers.unenforced(limited)]
            from jaxinfra_sim.network import netns

            node.network = netns.Network.create(egress=egress)
            if node.network.egress_note:
                node.notes.append(node.network.egress_note)
        except BaseException:
            node.close()
            raise
        return node

    def cgroup(self, pod: model.Pod, attempt: int, slot: int = 0, workload: int = 0) -> cgroups.PodGroup | None:
        """The group enforcing the limits of this pod's container (`slot` 0: its JAX container's, else its other
        container's at that place) in this attempt, and watching its OOM kills (a memory group without a limit
        for a container without one), where this machine allows it. Its process limit is the simulator's per-pod
        one (`capacity.POD_PIDS_LIMIT`), given to each container's group: a pod of several containers may hold that
        many tasks in each. `workload`: the workload's number in the simulation (workloads run side by side)."""
        if self.groups is None:
            return None
        name = f"{workload}-{attempt}-{pod.global_index}" + (f"-{slot}" if slot else "")
        return self.groups.pod(name, pod.memory_limit, pod.cpu_millis, watch=True, pids_max=capacity.POD_PIDS_LIMIT)

    @property
    def nproc(self) -> int | None:
        """The process limit a container sets itself (RLIMIT_NPROC) where no pids group enforces the per-pod one
        (`capacity.nproc_limit`); None where one does."""
        return capacity.nproc_limit(self.groups.controllers) if self.groups is not None else capacity.POD_PIDS_LIMIT

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
