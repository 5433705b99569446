"""Kueue's quota tree: ClusterQueues and Cohorts, and the most each may take of a flavor's resource with nothing else
admitted. Facts from kubernetes-sigs/kueue v0.19.2 (8eab6877, the release `jaxinfra.releases` pins):
pkg/cache/scheduler/resource_node.go (`localQuota`, `potentialAvailable`, `updateCohortResourceNode`,
`accumulateFromChild`), pkg/cache/scheduler/cohort.go and clusterqueue.go (a ClusterQueue's `cohortName`, a Cohort's
`parentName` and own `resourceGroups`), pkg/cache/hierarchy (a cycle of parents is an error, ErrCohortHasCycle).

A node lends its parent its subtree (its own nominal quota and what its children lend it) up to its `lendingLimit`
(all of it without one) and keeps the rest; it may take what it keeps plus the most its parent may take, at most its
subtree plus its `borrowingLimit` (unlimited without one). A cohort a ClusterQueue names exists without its object,
with no quota of its own.

Not emulated: usage (the simulator runs workloads one after another, so what Kueue would ever give is what counts),
fair sharing's weights; a cycle of parents, which Kueue refuses to build, is cut where it closes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any

from jaxinfra_sim.core.inputs import Objects, quantity


class Node(StrEnum):
    """The two kinds of node of Kueue's quota tree (kueue resource_node.go: ClusterQueues and Cohorts)."""

    CLUSTER_QUEUE = "ClusterQueue"
    COHORT = "Cohort"


@dataclass(frozen=True)
class Quota:
    """One flavor's quota of one resource on a node: nominal, and the limits on borrowing and lending (None: none)."""

    nominal: Fraction
    borrowing: Fraction | None = None
    lending: Fraction | None = None


def cohort_of(cluster_queue_spec: Mapping[str, Any]) -> str | None:
    """The cohort a ClusterQueue is in: `cohortName` (v1beta2), `cohort` (v1beta1), or none."""
    name = cluster_queue_spec.get("cohortName") or cluster_queue_spec.get("cohort")
    return str(name) if name else None


def _limit(value: Any) -> Fraction | None:
    return None if value is None else quantity(value) or Fraction(0)


class Cohorts:
    """The quota tree of the ClusterQueues and Cohorts the inputs hold (a cohort a ClusterQueue names exists without
    its object, with no quota of its own), and what each node may take with nothing else admitted. Computed without
    recursion and once per flavor and resource, so a hostile tree (thousands of nested Cohorts) costs linear time; a
    cycle of parents, which Kueue refuses to build (pkg/cache/scheduler: ErrCohortHasCycle), is cut where it closes."""

    def __init__(self, objects: Objects) -> None:
        parent: dict[tuple[Node, str], tuple[Node, str]] = {}
        self.quotas: dict[tuple[Node, str], dict[tuple[str, str], Quota]] = {}
        for (kind, _, name), obj in sorted(objects.kueue.items()):
            if kind not in (Node.CLUSTER_QUEUE, Node.COHORT):
                continue
            node = (Node(kind), name)
            spec = obj.get("spec") or {}
            up = cohort_of(spec) if node[0] is Node.CLUSTER_QUEUE else spec.get("parentName")
            if up:
                parent[node] = (Node.COHORT, str(up))
            self.quotas[node] = {
                (str(entry.get("name")), str(r.get("name"))): Quota(
                    quantity(r.get("nominalQuota", 0)) or Fraction(0),
                    _limit(r.get("borrowingLimit")),
                    _limit(r.get("lendingLimit")),
                )
                for group in spec.get("resourceGroups") or []
                for entry in group.get("flavors") or []
                for r in entry.get("resources") or []
            }
        self.parent = _without_cycles(parent)
        self.depth = _depths(self.parent)
        self._subtrees: dict[tuple[str, str], dict[tuple[Node, str], Fraction]] = {}

    def quota(self, node: tuple[Node, str], fr: tuple[str, str]) -> Quota:
        return self.quotas.get(node, {}).get(fr, Quota(Fraction(0)))

    def subtree(self, node: tuple[Node, str], fr: tuple[str, str]) -> Fraction:
        """Its own nominal quota and what its children lend it (kueue `updateCohortResourceNode`,
        `accumulateFromChild`: each child's subtree less what it keeps, `localQuota`)."""
        if fr not in self._subtrees:
            sub = {n: self.quota(n, fr).nominal for n in self.depth}
            for n in sorted(self.depth, key=lambda n: (-self.depth[n], n)):  # children before their parents
                if n in self.parent:
                    sub[self.parent[n]] += sub[n] - self._kept(n, fr, sub[n])
            self._subtrees[fr] = sub
        return self._subtrees[fr].get(node, self.quota(node, fr).nominal)

    def _kept(self, node: tuple[Node, str], fr: tuple[str, str], subtree: Fraction) -> Fraction:
        lending = self.quota(node, fr).lending
        return Fraction(0) if lending is None else max(Fraction(0), subtree - lending)

    def kept(self, node: tuple[Node, str], fr: tuple[str, str]) -> Fraction:
        """What a node keeps from its parent (kueue `localQuota`): its subtree past its lendingLimit, else nothing."""
        return self._kept(node, fr, self.subtree(node, fr))

    def most(self, node: tuple[Node, str], fr: tuple[str, str]) -> Fraction:
        """The most a node may ever take of a flavor's resource, nothing else admitted (kueue `potentialAvailable`):
        at the root its subtree; below, what it keeps plus what its parent may take, at most its subtree plus its
        borrowingLimit."""
        chain = [node]
        while chain[-1] in self.parent:
            chain.append(self.parent[chain[-1]])
        most = self.subtree(chain[-1], fr)
        for n in reversed(chain[:-1]):
            most = self.kept(n, fr) + most
            if (borrowing := self.quota(n, fr).borrowing) is not None:
                most = min(most, self.subtree(n, fr) + borrowing)
        return most


def _without_cycles(parent: Mapping[tuple[Node, str], tuple[Node, str]]) -> dict[tuple[Node, str], tuple[Node, str]]:
    """The parent links, a cycle cut at the link that closes it (walking from each node in order)."""
    out = dict(parent)
    done: set[tuple[Node, str]] = set()
    for start in sorted(out):
        path: list[tuple[Node, str]] = []
        on: set[tuple[Node, str]] = set()
        node = start
        while node in out and node not in done and node not in on:
            on.add(node)
            path.append(node)
            node = out[node]
        if node in on:
            del out[path[-1]]
        done.update(path)
    return out


def _depths(parent: Mapping[tuple[Node, str], tuple[Node, str]]) -> dict[tuple[Node, str], int]:
    """Every node of the (acyclic) tree, the named cohorts included, with how many ancestors it has."""
    depth: dict[tuple[Node, str], int] = {}
    for start in sorted({*parent, *parent.values()}):
        path = []
        node = start
        while node not in depth and node in parent:
            path.append(node)
            node = parent[node]
        depth.setdefault(node, 0)
        for n in reversed(path):
            depth[n] = depth[parent[n]] + 1
    return depth
