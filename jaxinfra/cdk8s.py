"""jaxinfra as cdk8s constructs: a Chart per cluster, a construct per job, for GitOps with `cdk8s synth`.

This adapter is thin (docs/design.md, "Outputs and adapters"): every object is one `cdk8s.ApiObject` wrapping a manifest
that `jaxinfra.render` produced, never a recomputation. `apiVersion`, `kind` and the
metadata go through the ApiObject's props; the body (`spec`, `automountServiceAccountToken`,
any other top-level field) is added with `ApiObject.add_json_patch(JsonPatch.add(...))`,
because Python's `ApiObject` takes no `spec`. Patches are applied after cdk8s sanitizes the
props, so the body reaches the output exactly as rendered (empty maps and lists included).

Names are always explicit (`metadata.name` of the manifest), whatever the construct path
and whether or not the chart disables name hashes: the env contract's DNS names
(`<pod hostname>.<service>`) are derived from them.

Chart labels and namespace follow cdk8s's rules for ordinary ApiObjects, so the contract
stays true:

- **labels**: a chart's `labels` are added to every object's `metadata.labels` (cdk8s's
  rule: the object's own labels win). jaxinfra's keys (`app.kubernetes.io/*`) and the job's
  own labels therefore always win. Pod-template labels, selectors and the env are untouched:
  chart labels never change what a Service selects.
- **namespace**: cdk8s gives the chart namespace only to objects that have none. A jaxinfra
  job in the `default` namespace is treated as having none: it moves to the chart's
  namespace. A job with any other namespace keeps it (explicit wins). The move happens in
  the spec, not in the output: the job is re-validated and re-rendered by the core in its new
  namespace, so every namespace-dependent field stays consistent, and the chart equals what
  `jaxinfra synth` renders for that spec. The coordinator address is namespace-relative
  (`<hostname>.<service>:<port>`), so DNS stays valid in any namespace. Like `jaxinfra
  synth`, a `JaxinfraChart` emits a `Namespace` for every namespace its jobs use other than
  the built-in ones, the chart's included (remove it with
  `chart.node.try_remove_child("Namespace-<ns>")` if another chart owns it); a
  `JaxJobConstruct` on its own emits none. Cluster-scoped objects (`Namespace`) never get a
  `metadata.namespace` from the chart.

Escape hatch: `construct.objects["JobSet"]` (or `chart.jobs["train"].objects[...]`,
`chart.namespaces["ml"]`) is the `ApiObject`; patch it as usual, e.g.
`obj.add_json_patch(JsonPatch.add("/spec/suspend", True))`. Patches run in the order added,
after jaxinfra's.

Ordering: cdk8s emits a chart's objects in construct-tree order (topologically sorted by
dependencies); the constructs are created in jaxinfra's apply order (namespaces, GPU networks, then per
job ServiceAccount, Service, workload) and each workload depends on its ServiceAccount and
Service, so `Testing.synth(chart)` lists the objects in the same order as
`jaxinfra.manifests(cluster)`.

Importing this module imports cdk8s and constructs (and starts Node through jsii on first
use); nothing else in jaxinfra imports it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# jsii starts Node when cdk8s is imported and prints a banner on Node versions past their end of life (Node 20 since
# 2026-10-30) into every synth's output: silenced unless the user set these (the names jsii's runtime reads,
# aws/jsii packages/@jsii/check-node).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

import cdk8s  # noqa: E402
from constructs import Construct  # noqa: E402

from jaxinfra.plan import ClusterPlan, JobPlan, plan
from jaxinfra.render import render_job
from jaxinfra.render.common import namespace as namespace_manifest
from jaxinfra.render.gpudirect import network_objects
from jaxinfra.render.kueue import kueue_objects
from jaxinfra.spec import Cluster, raw

__all__ = ["DEFAULT_NAMESPACE", "JaxJobConstruct", "JaxinfraChart", "api_object", "main", "stacks_app"]

#: A job in this namespace takes its chart's namespace, if the chart has one.
DEFAULT_NAMESPACE = "default"

_PROPS_METADATA = ("name", "namespace", "labels", "annotations")
_HEAD = ("apiVersion", "kind", "metadata")


def _pointer(*keys: str) -> str:
    """A JSON pointer (RFC 6901) to a nested key."""
    return "".join("/" + k.replace("~", "~0").replace("/", "~1") for k in keys)


def api_object(scope: Construct, id: str, manifest: Mapping[str, Any]) -> cdk8s.ApiObject:
    """One `ApiObject` for one rendered manifest: head in the props, body as JSON patches.

    The name is the manifest's; labels merge under the chart's (the manifest's win); a
    manifest without a namespace (a cluster-scoped object) stays without one.
    """
    meta = manifest["metadata"]
    obj = cdk8s.ApiObject(
        scope,
        id,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=cdk8s.ApiObjectMetadata(
            name=meta["name"],
            namespace=meta.get("namespace"),
            labels=meta.get("labels"),
            annotations=meta.get("annotations"),
        ),
    )
    patches = [cdk8s.JsonPatch.add(_pointer("metadata", k), v) for k, v in meta.items() if k not in _PROPS_METADATA]
    if "namespace" not in meta and cdk8s.Chart.of(obj).namespace is not None:
        patches.append(cdk8s.JsonPatch.remove(_pointer("metadata", "namespace")))
    patches += [cdk8s.JsonPatch.add(_pointer(k), v) for k, v in manifest.items() if k not in _HEAD]
    if patches:
        obj.add_json_patch(*patches)
    return obj


def _relocated(cluster: Cluster, namespace: str | None) -> Cluster:
    """The cluster with its `default`-namespace jobs in `namespace`, re-validated by the spec."""
    if (
        namespace is None
        or namespace == DEFAULT_NAMESPACE
        or all(j.namespace != DEFAULT_NAMESPACE for j in cluster.jobs)
    ):
        return cluster
    return cluster.with_changes(
        jobs=[{**raw(j), "namespace": namespace} if j.namespace == DEFAULT_NAMESPACE else j for j in cluster.jobs]
    )


class JaxJobConstruct(Construct):
    """One job's objects (ServiceAccount, Role and RoleBinding when the pods use the API, NetworkPolicy,
    headless Service, JobSet or Job) as ApiObjects.

    `objects` maps each kind to its ApiObject; `manifests` are the rendered dicts wrapped;
    `workload` is the JobSet or Job; `plan` is the job plan they were rendered from (in the
    chart's namespace, if the job was in `default` and the enclosing chart has one).
    """

    def __init__(self, scope: Construct, id: str, job: JobPlan) -> None:
        super().__init__(scope, id)
        chart_ns = cdk8s.Chart.of(self).namespace
        if chart_ns is not None and job.namespace == DEFAULT_NAMESPACE and chart_ns != DEFAULT_NAMESPACE:
            cluster = Cluster(
                name=job.cluster,
                node_pools=[job.pool],
                jobs=[{**raw(job.job), "namespace": chart_ns}],
                kueue=job.queue is not None,
                shadow=job.shadow,
                pod_security=None,
            )  # renders no Namespace: nothing to enforce
            [job] = plan(cluster).jobs
        self.plan: JobPlan = job
        self.manifests: list[dict[str, Any]] = render_job(job)
        self.objects: dict[str, cdk8s.ApiObject] = {m["kind"]: api_object(self, m["kind"], m) for m in self.manifests}
        *dependencies, self.workload = self.objects.values()  # the JobSet or Job, rendered last
        self.workload.node.add_dependency(*dependencies)  # identity and DNS before the workload


class JaxinfraChart(cdk8s.Chart):
    """Every object of a jaxinfra `Cluster`: one chart, equal to `jaxinfra.manifests(cluster)`.

    `labels` and `namespace` are cdk8s's chart props, with the semantics in this module's
    docstring; other keyword arguments go to `cdk8s.Chart` unchanged. `namespaces` maps each
    namespace to its `Namespace` ApiObject, `networks` lists the GPUDirect pools' `GKENetworkParamSet` and `Network`
    ApiObjects, `jobs` each job name (`<namespace>/<name>` where a
    name repeats across namespaces) to its `JaxJobConstruct`;
    `cluster` is the cluster as rendered (after any move to the chart namespace).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        cluster: Cluster,
        *,
        labels: Mapping[str, str] | None = None,
        namespace: str | None = None,
        **chart_props: Any,
    ) -> None:
        super().__init__(
            scope, id, labels=dict(labels) if labels is not None else None, namespace=namespace, **chart_props
        )
        self.cluster: Cluster = _relocated(cluster, namespace)
        cp: ClusterPlan = plan(self.cluster)
        self.namespaces: dict[str, cdk8s.ApiObject] = {
            ns: api_object(self, f"Namespace-{ns}", namespace_manifest(ns, cp.pod_security)) for ns in cp.namespaces
        }
        self.networks: list[cdk8s.ApiObject] = [  # the GPUDirect pools' networks (GKE multi-networking)
            api_object(self, f"{m['kind']}-{m['metadata']['name']}", m)
            for stack in cp.gpudirect
            for m in network_objects(stack, cp.name)
        ]
        self.queues: list[cdk8s.ApiObject] = [  # Kueue (Cluster(kueue=True)): flavors, ClusterQueues, LocalQueues
            api_object(
                self,
                f"{m['kind']}-{m['metadata']['name']}"
                + (f".{m['metadata']['namespace']}" if "namespace" in m["metadata"] else ""),
                m,
            )
            for m in kueue_objects(cp.queues)
        ]
        shared = {jp.name for jp in cp.jobs if sum(j.name == jp.name for j in cp.jobs) > 1}
        self.jobs: dict[str, JaxJobConstruct] = {}
        for jp in cp.jobs:  # key: the job name, or `<namespace>/<name>` where names repeat across namespaces
            key = f"{jp.namespace}/{jp.name}" if jp.name in shared else jp.name
            self.jobs[key] = JaxJobConstruct(self, key.replace("/", "."), jp)


def stacks_app(stacks: Iterable[str | Path] = ("stacks",), outdir: str | None = None) -> cdk8s.App:
    """An `App` with one `JaxinfraChart` per stack (files or folders of them), id = cluster name.

    Synthesizing it (`app.synth()`) writes `<outdir>/<cluster>.k8s.yaml` per stack; `outdir`
    defaults to cdk8s's (`$CDK8S_OUTDIR`, else `dist`). Raises `SpecError` / `StackError`
    listing every problem of every stack, before anything is built.
    """
    from jaxinfra import stack
    from jaxinfra.errors import JaxinfraError, Problem, SpecError

    clusters, problems = [], []
    for path in stack.expand(stacks):
        try:
            clusters.append(stack.load(path))
        except JaxinfraError as err:
            problems += [p.located(str(path)) for p in err.problems]
    names = [c.name for c in clusters]
    if len(set(names)) != len(names):
        problems.append(Problem("stacks", names, "two stacks declare the same cluster name", "rename one cluster"))
    if problems:
        raise SpecError(problems)
    app = cdk8s.App(outdir=outdir) if outdir is not None else cdk8s.App()
    for cluster in clusters:
        JaxinfraChart(app, cluster.name, cluster)
    return app


def main(stacks: Iterable[str | Path] = ("stacks",)) -> int:
    """`cdk8s synth`'s app (`python -m jaxinfra.cdk8s`, as cdk8s.yaml names it): one chart per stack, written to
    cdk8s's output folder, whose stale `*.k8s.yaml` files go first (so a deleted stack's objects are pruned by
    the GitOps tool). Spec problems are printed one per line, as `jaxinfra synth` prints them: status 2,
    nothing written."""
    from jaxinfra.errors import INPUT_ERROR, JaxinfraError

    try:
        app = stacks_app(stacks)
    except JaxinfraError as err:
        for p in err.problems:
            print(f"error: {p}", file=sys.stderr)
        print(f"cdk8s app: {len(err.problems)} problem(s) ({err.kind}); nothing written", file=sys.stderr)
        return INPUT_ERROR
    for stale in Path(app.outdir).glob(f"*{app.output_file_extension}"):
        stale.unlink()
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
