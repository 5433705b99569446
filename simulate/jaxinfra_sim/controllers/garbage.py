"""The garbage collector (kube-controller-manager's), as it treats the applied objects: every object whose
ownerReferences all name owners the cluster does not hold is deleted within moments of its creation, before the
simulated controllers act on it, and what it owns goes with it (background propagation: a deleted Job's pods, a
deleted JobSet's Jobs). Which objects, and why, is `jaxinfra.admission.owners`' (the garbage collector's rules, cited
there), which also notes each in the report; here the cluster loses them: a deleted passive object is no longer there
for the pods to read (a ConfigMap, a Secret, a LimitRange), and a deleted workload never runs, a problem of the input.

Not emulated: the moments before the deletion, in which a workload's controller may already have created pods (they
are deleted with it); the API server's own view of the objects (`cluster/apiview.py`) still lists deleted passive
objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jaxinfra.admission.owners import OWNERS_FIX, Orphan, orphans
from jaxinfra.admission.store import Store, key_of
from jaxinfra.errors import Problem
from jaxinfra_sim.core.inputs import oid


def collect(store: Store) -> dict[tuple[str, str, str], Orphan]:
    """Delete from `store` every object the garbage collector deletes; those objects, by their key in the store."""
    deleted = {}
    for orphan in orphans(store):
        key = key_of(orphan.obj)
        if orphan.deleted and key is not None:
            store.remove(*key)
            deleted[key] = orphan
    return deleted


def never_runs(obj: Mapping[str, Any], orphan: Orphan, document: int) -> Problem:
    """The input problem of a workload the garbage collector deletes: its pods never run to completion. `document`:
    its place among the cluster's manifests, which names its file (`sources.Source.where`)."""
    return Problem(
        f"{oid(obj)} metadata.ownerReferences",
        [str(ref.get("uid")) for ref in obj["metadata"]["ownerReferences"] if isinstance(ref, Mapping)],
        "the garbage collector deletes the workload within moments of its creation, and with it the pods its "
        f"controller creates, so it never runs to completion: no owner it names exists ({'; '.join(orphan.why)})",
        OWNERS_FIX,
        document=document,
    )
