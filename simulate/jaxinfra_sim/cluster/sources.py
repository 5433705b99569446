"""What one `jaxinfra simulate` invocation applies, cluster by cluster, as `kubectl apply` would leave it.

One invocation, one cluster: every YAML (or JSON) file and folder on the command line is applied to
the same cluster, in order (`kubectl apply -f a.yaml -f dir/ -R`), so a Job's ServiceAccount, a
Kueue workload's queues or a TrainJob's ClusterTrainingRuntime may sit in another file. A stack file
(`.py`) is the cluster it declares: its rendered manifests, a cluster of its own.

An object applied twice (same group, kind, namespace and name; in one file or in two) is updated by
the later apply, which wins; it stays where it was first created. A workload is the exception: the
API server does not let an apply change a Job's or JobSet's pod template (immutable) and the pods
exist already, so a second, different definition is a problem; an identical one changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from jaxinfra.admission.store import CLUSTER_SCOPED
from jaxinfra.errors import Problem
from jaxinfra_sim.controllers import WORKLOAD_KINDS
from jaxinfra_sim.core.inputs import meta, namespace_of, oid
from jaxinfra_sim.core.options import Options


def name_of(obj: Mapping) -> str:
    """How notes and the report's inputs name an object: `kind/namespace/name`, `kind/name` when cluster-scoped."""
    return f"{obj.get('kind')}/{meta(obj).get('name')}" if obj.get("kind") in CLUSTER_SCOPED else oid(obj)


_Key = tuple[str, str, str, str] | tuple[str, int]
"""Who an object is to `applied`: its identity on the API server (`_key`), or ("", its position) without one."""


def _key(obj: Mapping) -> tuple[str, str, str, str] | None:
    """An object's identity on the API server: (group, kind, namespace, name); None without a kind or a name."""
    if not isinstance(obj, Mapping) or not obj.get("kind") or not meta(obj).get("name"):
        return None
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    namespace = "" if obj["kind"] in CLUSTER_SCOPED else namespace_of(obj)
    return group, str(obj["kind"]), namespace, str(meta(obj)["name"])


@dataclass(frozen=True)
class Source:
    """One cluster's objects in apply order (each once), with the file each came from (the file of its last apply)."""

    name: str  # the stack file, or the YAML arguments as given
    manifests: tuple[Mapping[str, Any], ...]
    files: tuple[str, ...]  # per manifest
    documents: tuple[int, ...] = ()  # per manifest: its document's place in its file, from 0
    notes: tuple[str, ...] = ()  # objects applied more than once
    problems: tuple[Problem, ...] = ()  # workloads defined twice, differently

    def _manifest_of(self, path: str) -> int | None:
        """The manifest a problem's path or a workload's id names (by its object's id), None if none."""
        head = path.split(" ", 1)[0]
        best, found = "", None
        for i, obj in enumerate(self.manifests):
            name = oid(obj) if isinstance(obj, Mapping) else ""
            if name and (head == name or head.startswith((name + ".", name + "["))) and len(name) > len(best):
                best, found = name, i
        return found

    def file_of(self, path: str) -> str:
        """The file of the object a problem's path or a workload's id names (the cluster's name if none)."""
        i = self._manifest_of(path)
        return self.name if i is None else self.files[i]

    def where(self, problem: Problem) -> Problem:
        """The problem in its file and document: a problem of the simulation's names its manifest by its place among
        the cluster's (`document`, without a file) or by its object's id in its path."""
        if problem.file is not None:
            return problem
        i = problem.document if problem.document is not None else self._manifest_of(problem.path)
        if i is None or i >= len(self.files):
            return problem.located(self.name)
        return replace(problem, file=self.files[i], document=self.documents[i] if self.documents else None)

    def inputs(self) -> dict[str, list[str]]:
        """Per file, the objects the cluster holds from it (`name_of`), in apply order."""
        out: dict[str, list[str]] = {}
        for obj, file in zip(self.manifests, self.files):
            out.setdefault(file, []).append(name_of(obj) if isinstance(obj, Mapping) else repr(obj))
        return out


def applied(name: str, items: Iterable[tuple[str, int, Mapping[str, Any]]]) -> Source:
    """The cluster that applying `items` ((file, document, object), in order) leaves: later applies win, workloads
    excepted."""
    order: list[_Key] = []
    held: dict[_Key, tuple[str, int, Mapping[str, Any]]] = {}
    seen: dict[_Key, list[str]] = {}
    notes: list[str] = []
    problems: list[Problem] = []
    for file, document, obj in items:
        key: _Key | None = _key(obj)
        if key is None:  # not an object the API server would store: emulate reports it
            key = ("", len(order))
        if key not in held:
            order.append(key)
            held[key] = (file, document, obj)
            seen[key] = [file]
            continue
        before_file, _, before = held[key]
        seen[key].append(file)
        where = f"twice in {file}" if before_file == file else f"in {before_file} and {file}"
        if obj == before:
            notes.append(f"{name_of(obj)} defined {where}, identically: the second apply changes nothing")
        elif (obj.get("apiVersion"), obj.get("kind")) in WORKLOAD_KINDS:  # a kind a controller turns into pods
            problems.append(
                Problem(
                    oid(obj),
                    seen[key][:],
                    f"defined more than once, differently ({where}): on a "
                    "cluster the later apply cannot change the workload (its pod template is immutable) and "
                    "its pods exist already",
                    "give each workload its own name, or keep one definition "
                    "(files meant for different clusters: simulate each on its own)",
                    file,
                    document,
                )
            )
        else:
            held[key] = (file, document, obj)
            notes.append(f"{name_of(obj)} defined {where}: the later apply wins")
    kept = [held[k] for k in order]
    return Source(
        name,
        tuple(obj for _, _, obj in kept),
        tuple(file for file, _, _ in kept),
        tuple(document for _, document, _ in kept),
        tuple(notes),
        tuple(problems),
    )


def admitted(name: str, requests: Iterable[Any]) -> Source:
    """The cluster that applying `requests` (`jaxinfra.admission.Request`s, in order) leaves: each object through the
    API server's front door (defaulted, mutated; refused ones not stored), then `applied`. What the API server refuses
    is a problem of the cluster's (exit 2, nothing started); its warnings and what jaxinfra assumes are notes."""
    from jaxinfra.admission import admit

    result = admit(requests)
    source = applied(name, [(request.file, request.index, obj) for request, obj in result.stored])
    return replace(
        source,
        notes=source.notes + tuple(result.notes) + tuple(f"warning: {w}" for w in result.warnings),
        problems=tuple(result.problems) + source.problems,
    )


@dataclass(frozen=True)
class Request:
    """One `jaxinfra simulate`, as the command line hands it to the simulator (across the prefork's pipe too): the
    inputs, each source its own cluster; how to run them; and what to write once the verdict is in."""

    sources: Sequence[Source]
    options: Options = field(default_factory=lambda: Options())
    logs: bool = True  # the pods' output, live
    json_report: Path | None = None
    trace: Path | None = None
    html: Path | None = None
    notes: tuple[str, ...] = ()  # what the run cannot tell (a CPU shadow's limits), printed and reported
