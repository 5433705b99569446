"""What the garbage collector makes of the ownerReferences of the objects the API server stores: which objects it
deletes because every owner they name is absent, and which it leaves because it cannot resolve an owner.

The API server gives every object it creates a uid of its own (kubernetes @025439988428
staging/src/k8s.io/apiserver/pkg/registry/rest/meta.go FillObjectMetaSystemFields: the uid is the server's, never the
request's), so an ownerReference in an applied manifest can name no uid of the cluster it is applied to: not an
owner's among the inputs (which gets its uid when it is created), not one copied from another cluster's object
(`kubectl get -o yaml`). On a cluster the garbage collector then deletes the object within moments of its creation.

Emulated from kubernetes/kubernetes @02830ed24bc1 pkg/controller/garbagecollector/garbagecollector.go:
- `isDangling`: a reference is looked up by its apiVersion, kind and name, in the dependent's namespace where the
  kind is namespaced; absent, or present with another uid, it is dangling;
- `attemptToDeleteItem`: an object whose references are all dangling is deleted (background propagation: what its
  controller created goes with it); one with an existing owner only loses its dangling references (here no owner
  exists: none can name its uid);
- `attemptToDeleteWorker`: a reference the collector cannot resolve fails the whole attempt, so the object is left as
  it is and retried: a kind the cluster does not serve (a `restMappingError`), and a namespaced owner of a
  cluster-scoped object (`namespacedOwnerOfClusterScopedObjectErr`, with the Warning event OwnerRefInvalidNamespace:
  kubernetes/website @d9604f3adad7 content/en/docs/concepts/overview/working-with-objects/owners-dependents.md).

The front door notes each (`jaxinfra.admission.admit`); the simulator's garbage collector deletes them
(`jaxinfra_sim.controllers.garbage`). Not emulated: a deleted Namespace taking every object in it along.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jaxinfra.admission.decoded import as_str, entries
from jaxinfra.admission.store import CLUSTER_SCOPED, Store, meta, namespace_of

OWNERS_FIX = (
    "leave metadata.ownerReferences out of applied manifests: the controller that creates an object sets them, with "
    "its owner's uid"
)


@dataclass(frozen=True)
class Orphan:
    """An object with an ownerReference to no owner of the cluster: whether the garbage collector deletes it (every
    reference dangling) or leaves it (a reference it cannot resolve), and what each reference resolves to."""

    obj: Mapping
    deleted: bool
    why: tuple[str, ...]

    @property
    def name(self) -> str:
        """`Kind/namespace/name` (`Kind/name` when cluster-scoped), as the simulator names an object."""
        namespace = namespace_of(self.obj)
        return "/".join(p for p in (str(self.obj.get("kind")), namespace, str(meta(self.obj).get("name"))) if p)

    def note(self) -> str:
        """What the garbage collector does with it, as a note of the report."""
        said = "; ".join(self.why)
        if self.deleted:
            return (
                f"{self.name}: the garbage collector deletes it once it is stored (and what it owns with it): no owner "
                f"it names exists ({said}); {OWNERS_FIX}"
            )
        return f"{self.name}: the garbage collector leaves it, retrying: {said}"


def orphans(store: Store) -> list[Orphan]:
    """The objects `store` holds (what the API server stores) whose ownerReferences name an owner the cluster does not
    hold, in the order stored, each with the garbage collector's verdict."""
    from jaxinfra.admission import schema

    applied = {(obj.get("apiVersion"), obj.get("kind")) for obj in store}
    crds = list(store.of_kind("CustomResourceDefinition"))
    out = []
    for obj in store:
        refs = list(entries(meta(obj).get("ownerReferences")))
        if not refs:
            continue
        why, resolved, namespace = [], True, namespace_of(obj)
        for i, ref in refs:
            api_version, kind, name = as_str(ref.get("apiVersion")), as_str(ref.get("kind")), as_str(ref.get("name"))
            where = name if kind in CLUSTER_SCOPED or not namespace else f"{namespace}/{name}"
            owner = f"ownerReferences[{i}] names {kind} {where} ({api_version}, uid {as_str(ref.get('uid'))})"
            served = schema.resolve(api_version, kind, crds)[0]
            if served == "unserved" or (served == "unknown" and (api_version, kind) not in applied):
                resolved = False
                why.append(f"{owner}, a kind the cluster does not serve, so it cannot be resolved")
            elif kind not in CLUSTER_SCOPED and not namespace:
                resolved = False
                why.append(
                    f"{owner}, a namespaced kind, as the owner of a cluster-scoped object, which cannot be (Warning "
                    "event OwnerRefInvalidNamespace)"
                )
            elif store.get(kind, namespace, name) is not None:
                why.append(f"{owner}: the inputs create one, with a uid the API server gives it, not this one")
            else:
                why.append(f"{owner}: the cluster has no such object")
        out.append(Orphan(obj, resolved, tuple(why)))
    return out
