"""What one command line names: its stacks loaded (`load`, with --backend and --shadow applied) and the clusters of
the invocation (`sources`: each stack its own, all its YAML one more), with what each CPU shadow among them proves
(`shadow_notes`). `jaxinfra.cli`'s commands share them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxinfra import backends
from jaxinfra.errors import JaxinfraError, ManifestError, Problem, SpecError

if TYPE_CHECKING:
    from jaxinfra.spec import Cluster


def load(stacks: list[Path], backend: str | None, shadow: dict[str, str] | None = None) -> list[tuple[Path, Cluster]]:
    """Load every stack (and apply --backend, and --shadow with its requests), collecting the problems of all of
    them."""
    from jaxinfra import stack

    if backend is not None and backend not in backends.BACKENDS:
        raise SpecError(
            [Problem("--backend", backend, "unknown backend", f"use one of {', '.join(backends.BACKENDS)}")]
        )
    loaded, problems = [], []
    for path in stack.expand(stacks):
        try:
            cluster = stack.load(path)
            cluster = cluster.with_backend(backend) if backend else cluster
            if shadow is not None:
                from jaxinfra.shadow import shadow as cpu_shadow

                cluster = cpu_shadow(cluster, **shadow)
            loaded.append((path, cluster))
        except JaxinfraError as err:
            problems += [p.located(str(path)) for p in err.problems]
    if problems:
        raise SpecError(problems)
    return loaded


def shadow_notes(sources: list[Any]) -> list[str]:
    """What each CPU shadow among the inputs proves and cannot, for the report (here, where the spec is loaded
    already, not in the simulator's warm child)."""
    from jaxinfra.names import SHADOW_OF

    manifests = [m for source in sources for m in source.manifests]
    if not any(SHADOW_OF in ((m.get("metadata") or {}).get("annotations") or {}) for m in manifests):
        return []
    from jaxinfra.shadow import notes

    return notes(manifests)


def sources(inputs: list[Path], backend: str | None) -> list[Any]:
    """The clusters of one invocation (`jaxinfra_sim.cluster.sources.Source`): each stack its own (synthesized in
    memory), all the YAML files and folders (walked as `kubectl apply -f DIR -R` does) one more, read as they are."""
    from jaxinfra import manifest_paths, manifests, stack
    from jaxinfra.admission import Request, read
    from jaxinfra_sim.cluster import sources as clusters

    stacks = [p for p in inputs if p.suffix == ".py" or p.is_dir()]
    out = (
        [
            clusters.admitted(str(path), [Request(str(path), i, m) for i, m in enumerate(manifests(cluster))])
            for path, cluster in load(stacks, backend)
        ]
        if stacks
        else []
    )
    given = [p for p in inputs if p.suffix != ".py"]  # YAML files, and folders (their stacks are loaded above)
    problems: list[Problem] = []
    files = manifest_paths.expand(given, problems)
    for folder in filter(Path.is_dir, given):
        if not stack.discover(folder) and not any(f.is_relative_to(folder) for f in files):
            problems.append(
                Problem(
                    str(folder),
                    str(folder),
                    "no stack (.py) and no .json, .yaml or .yml file in this folder",
                    "pass a folder of stacks or of manifests",
                )
            )
    requests, unreadable = read(files)
    if problems := problems + unreadable:
        raise ManifestError(problems)
    return out + ([clusters.admitted(", ".join(map(str, given)), requests)] if files else [])
