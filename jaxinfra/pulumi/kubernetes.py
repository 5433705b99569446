"""Rendered manifests as pulumi_kubernetes resources: `k8s_resource` (one object, typed where the kind is
built in) and the components `JaxJobComponent` (one job's objects), `ControllerInstall` (one controller) and
`NodeInstaller` (one GPUDirect node installer).

Nothing here is GKE's: the same objects go to any cluster. The adapter's one change to the rendered
objects, `pulumi.com/skipAwait`, is made here (the package docstring says why).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from jaxinfra import backends, gpudirect, releases
from jaxinfra.plan import ClusterPlan, JobPlan
from jaxinfra.render import render_job
from jaxinfra.upstream import BATCH_API, NETWORKING_API, RBAC_API

#: The annotation this adapter adds (see the package docstring); the value must be the string "true".
SKIP_AWAIT = "pulumi.com/skipAwait"
#: Kinds that run pods (the backends' workloads): they get SKIP_AWAIT and are replaced (not patched) when their spec
#: changes.
WORKLOAD_KINDS = frozenset(b.kind for b in backends.BACKENDS.values())
#: Kinds that get SKIP_AWAIT although they are no workload (the headless Service and the claim: the package docstring).
SKIP_AWAIT_KINDS = WORKLOAD_KINDS | {"Service", "PersistentVolumeClaim"}

#: Typed pulumi_kubernetes classes for built-in kinds; anything else is a CustomResource.
_TYPED: dict[tuple[str, str], Any] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "PersistentVolumeClaim"): k8s.core.v1.PersistentVolumeClaim,
    (BATCH_API, "Job"): k8s.batch.v1.Job,
    (RBAC_API, "Role"): k8s.rbac.v1.Role,
    (RBAC_API, "RoleBinding"): k8s.rbac.v1.RoleBinding,
    (NETWORKING_API, "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
}


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def logical_name(manifest: Mapping[str, Any]) -> str:
    """The Pulumi resource name: `namespace/name` (the type is part of the URN), as pulumi_kubernetes.yaml names
    them."""
    meta = manifest["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def with_skip_await(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the manifest with `pulumi.com/skipAwait: "true"` (the adapter's one annotation)."""
    meta = dict(manifest["metadata"])
    meta["annotations"] = {**meta.get("annotations", {}), SKIP_AWAIT: "true"}
    return {**manifest, "metadata": meta}


class _Object(pulumi.CustomResource):
    """A custom resource whose kind has fields beside metadata and spec (Kueue's WorkloadPriorityClass: `value`,
    `description`), which pulumi_kubernetes' `apiextensions.CustomResource` does not take (its arguments: apiVersion,
    kind, metadata, spec): registered as that class registers one, type `kubernetes:<apiVersion>:<kind>`, with every
    field as rendered."""

    def __init__(self, name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}", name, dict(manifest), opts)


def k8s_resource(manifest: Mapping[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """One rendered manifest as a typed pulumi_kubernetes resource; fields passed as rendered."""
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    if kind in SKIP_AWAIT_KINDS:
        manifest = with_skip_await(manifest)
    if kind in WORKLOAD_KINDS:  # an immutable template: replace (delete first: the name is explicit), never patch
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(replace_on_changes=["spec"], delete_before_replace=True)
        )
    fields = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    cls = _TYPED.get((api_version, kind))
    if cls is None and set(fields) - {"metadata", "spec"}:
        return _Object(logical_name(manifest), manifest, opts)
    if cls is None:
        return k8s.apiextensions.CustomResource(
            logical_name(manifest), api_version=api_version, kind=kind, opts=opts, **fields
        )
    return cls(logical_name(manifest), opts=opts, **{_snake(k): v for k, v in fields.items()})


class JaxJobComponent(pulumi.ComponentResource):
    """One job's objects (`render_job`): identity and DNS first, then the workload that needs them; an
    object of a custom kind after its controller (`serving`: kind -> the install it waits for)."""

    def __init__(
        self,
        name: str,
        jp: JobPlan,
        *,
        provider: pulumi.ProviderResource,
        depends_on: Sequence[pulumi.Resource] = (),
        serving: Mapping[str, Sequence[pulumi.Resource]] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("jaxinfra:index:JaxJob", name, None, opts)
        self.plan = jp
        self.manifests = render_job(jp)
        self.resources: list[pulumi.CustomResource] = []
        before: list[pulumi.Resource] = []
        for m in self.manifests:
            deps = [*depends_on, *(serving or {}).get(m["kind"], ()), *(before if m["kind"] in WORKLOAD_KINDS else [])]
            res = k8s_resource(m, pulumi.ResourceOptions(parent=self, provider=provider, depends_on=deps))
            self.resources.append(res)
            if m["kind"] not in WORKLOAD_KINDS:
                before.append(res)
        self.job_name = pulumi.Output.from_input(jp.name)
        self.coordinator_address = pulumi.Output.from_input(jp.coordinator_address)
        self.register_outputs({"job_name": self.job_name, "coordinator_address": self.coordinator_address})


class ControllerInstall(pulumi.ComponentResource):
    """One controller of `jaxinfra.releases`: its Helm chart in its namespace, or its release manifests,
    through the provider-side components of pulumi-kubernetes (`helm.v4.Chart`, `kustomize.v2.Directory`:
    the provider fetches and renders them, and awaits their Deployments, so the webhooks answer before
    any object of theirs is created). Trainer also gets its `jax-distributed` runtime when a TrainJob names it."""

    def __init__(
        self,
        c: releases.Controller,
        cp: ClusterPlan,
        *,
        provider: pulumi.ProviderResource,
        depends_on: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("jaxinfra:index:Controller", c.name, None, opts)
        self.controller = c
        on = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=list(depends_on))
        if c.chart:
            ns = k8s.core.v1.Namespace(c.namespace, metadata={"name": c.namespace}, opts=on)
            self.install: pulumi.Resource = k8s.helm.v4.Chart(
                c.name,
                chart=c.chart,
                version=c.version,
                namespace=c.namespace,
                values=releases.helm_values(c, cp),
                opts=pulumi.ResourceOptions.merge(on, pulumi.ResourceOptions(depends_on=[ns])),
            )
        else:
            self.install = k8s.kustomize.v2.Directory(c.name, directory=c.directory, opts=on)
        self.resources: list[pulumi.Resource] = [self.install]
        if c is releases.TRAINER and releases.TRAINER_JAX_RUNTIME in releases.referenced_runtimes(cp):
            self.resources.append(
                k8s.yaml.v2.ConfigFile(
                    releases.TRAINER_JAX_RUNTIME,
                    file=releases.TRAINER_JAX_RUNTIME_FILE,
                    opts=pulumi.ResourceOptions.merge(on, pulumi.ResourceOptions(depends_on=[self.install])),
                )
            )
        self.register_outputs({"version": c.tag})


class NodeInstaller(pulumi.ComponentResource):
    """One DaemonSet the GPUDirect nodes need (`releases.installers`: an NCCL plugin installer, the NRI device
    injector), applied from its manifest at the commit `jaxinfra.gpudirect` pins, as xpk applies it (`kubectl apply -f`,
    xpk @ 367c8382 src/xpk/core/cluster.py install_nccl_on_cluster) but through the provider-side `yaml.v2.ConfigFile`,
    which fetches the file while `pulumi up` runs."""

    def __init__(
        self,
        installer: gpudirect.Installer,
        *,
        provider: pulumi.ProviderResource,
        depends_on: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("jaxinfra:index:NodeInstaller", installer.name, None, opts)
        self.installer = installer
        self.install = k8s.yaml.v2.ConfigFile(
            installer.name,
            file=installer.url,
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=list(depends_on)),
        )
        self.register_outputs({"url": installer.url})
