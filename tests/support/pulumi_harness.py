"""Runs the Pulumi program under `pulumi.runtime.set_mocks`: no Pulumi CLI, no plugins, no cloud.

The program that Pulumi.yaml names is run with runpy, as the Python language host runs it. A
recording resource monitor sees each registration as the engine would: type, name, inputs, parent,
dependencies, provider, replaceOnChanges, deleteBeforeReplace, retainOnDelete; a recording logger keeps
the program's warnings. Shared by tests/test_pulumi*.py.
"""

from __future__ import annotations

import contextlib
import json
import logging
import runpy
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime.settings
import pytest
import yaml
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor

from tests.support.paths import ROOT
from tests.support.pulumi_up_mocked import ACCOUNT_T, CA, GKE_T, PROJECT_NUMBER, CloudMocks  # noqa: F401 (the tests' too)

PROJECT = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
MAIN = ROOT / PROJECT["main"]
GKE = {"jaxinfra:provider": "gke", "gcp:project": "proj", "jaxinfra:location": "us-east5-a"}
EXISTING = {"jaxinfra:provider": "existing", "jaxinfra:context": "kind-test"}
PROVIDERS = {"gke": GKE, "existing": EXISTING}

STACK_T = "pulumi:pulumi:Stack"
CLUSTER_T = "jaxinfra:index:Cluster"
JOB_T = "jaxinfra:index:JaxJob"
CONTROLLER_T = "jaxinfra:index:Controller"
INSTALLER_T = "jaxinfra:index:NodeInstaller"
POOL_T = "gcp:container/nodePool:NodePool"
NETWORK_T = "gcp:compute/network:Network"
SUBNET_T = "gcp:compute/subnetwork:Subnetwork"
FIREWALL_T = "gcp:compute/firewall:Firewall"
IAM_T = "gcp:projects/iAMMember:IAMMember"
BUCKET_T = "gcp:storage/bucket:Bucket"
BUCKET_IAM_T = "gcp:storage/bucketIAMMember:BucketIAMMember"
K8S_PROVIDER_T = "pulumi:providers:kubernetes"
CHART_T = "kubernetes:helm.sh/v4:Chart"
KUSTOMIZE_T = "kubernetes:kustomize/v2:Directory"
CONFIG_FILE_T = "kubernetes:yaml/v2:ConfigFile"
NAMESPACE_T = "kubernetes:core/v1:Namespace"
WORKLOADS = {"Job", "JobSet", "JAXJob", "TrainJob"}

#: What `getCluster` answers of a cluster whose Cloud Storage FUSE CSI driver add-on is on.
FUSE_ON = {"addonsConfigs": [{"gcsFuseCsiDriverConfigs": [{"enabled": True}]}]}
#: What `getCluster` answers for an existing GKE cluster with every security setting (and the FUSE driver) on.
SECURE_CLUSTER = {
    "datapathProvider": "ADVANCED_DATAPATH",
    "networkPolicies": [],
    "enableShieldedNodes": True,
    "workloadIdentityConfigs": [{"workloadPool": "my-project.svc.id.goog"}],
    **FUSE_ON,
}


def k8s_type(m: dict[str, Any]) -> str:
    """pulumi_kubernetes' type token of a manifest: kubernetes:<group or core>/<version>:<Kind>."""
    group, _, version = m["apiVersion"].rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{m['kind']}"


def ref(urn: str) -> tuple[str, str] | None:
    """(type, name) of a URN (or of a provider reference `urn::id`)."""
    if not urn:
        return None
    parts = urn.split("::")
    return parts[2].split("$")[-1], parts[3]


@dataclass
class Registered:
    type: str
    name: str
    inputs: dict[str, Any]
    parent: tuple[str, str] | None
    deps: set[tuple[str, str] | None]
    provider: tuple[str, str] | None
    replace_on_changes: list[str]
    delete_before_replace: bool
    retain_on_delete: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return self.type, self.name


@dataclass
class Run:
    resources: list[Registered] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    secret: dict[str, bool] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def of(self, typ: str) -> list[Registered]:
        return [r for r in self.resources if r.type == typ]

    def one(self, typ: str, name: str) -> Registered:
        [r] = [r for r in self.resources if (r.type, r.name) == (typ, name)]
        return r

    @property
    def k8s(self) -> list[Registered]:
        """The Kubernetes objects of the stack (not those of the controllers and node installers jaxinfra installs)."""
        return [
            r
            for r in self.resources
            if r.type.startswith("kubernetes:") and (r.parent or ("",))[0] not in (CONTROLLER_T, INSTALLER_T)
        ]

    @property
    def pools(self) -> dict[str, Registered]:
        """The GKE node pools of the stack's node pools (not the system pool)."""
        return {r.name: r for r in self.of(POOL_T) if r.name != "system"}

    @property
    def controllers(self) -> list[Registered]:
        return self.of(CONTROLLER_T)

    def of_parent(self, name: str, typ: str = CONTROLLER_T) -> list[Registered]:
        """The children of a component (by default a controller's: its namespace, install, runtime)."""
        return [r for r in self.resources if r.parent == (typ, name)]

    def controller(self, name: str) -> Registered:
        """A controller's install: its Helm chart or its kustomization."""
        [r] = [r for r in self.resources if r.parent == (CONTROLLER_T, name) and r.type in (CHART_T, KUSTOMIZE_T)]
        return r


class Mocks(CloudMocks):
    """The cloud's answers (CloudMocks), each call recorded; getCluster answers as `existing` says."""

    def __init__(self, run: Run, existing: dict[str, Any] | None = None):
        self.run = run
        self.existing = SECURE_CLUSTER if existing is None else existing

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:  # type: ignore[override]  # as CloudMocks
        self.run.calls.append((args.token, dict(args.args)))
        if args.token == "gcp:container/getCluster:getCluster":
            return {
                "name": args.args["name"],
                "endpoint": "203.0.113.2",
                **self.existing,
                "masterAuths": [
                    {
                        "clusterCaCertificate": CA,
                        "clientCertificate": "",
                        "clientKey": "",
                        "clientCertificateConfigs": [],
                    }
                ],
            }
        return super().call(args)


class Monitor(MockMonitor):
    """Records what the engine would see of each registration, beyond MockResourceArgs."""

    def __init__(self, run: Run, mocks: Mocks):
        super().__init__(mocks)
        self.run = run

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # deserializes the inputs on this thread's loop first
        if request.type != STACK_T:
            self.run.resources.append(
                Registered(
                    request.type,
                    request.name,
                    rpc.deserialize_properties(request.object),
                    ref(request.parent),
                    {ref(d) for d in request.dependencies},
                    ref(request.provider.rpartition("::")[0]) if request.provider else None,
                    list(request.replaceOnChanges),
                    request.deleteBeforeReplace,
                    request.retainOnDelete,
                )
            )
        return response


class Warnings(logging.Handler):
    def __init__(self, run: Run):
        super().__init__(logging.WARNING)
        self.run = run

    def emit(self, record: logging.LogRecord) -> None:
        self.run.warnings.append(record.getMessage())


def _mock(run: Run, config: dict[str, Any], existing: dict[str, Any] | None) -> None:
    mocks = Mocks(run, existing)
    logger = logging.Logger("pulumi-mocks")  # this run's own, outside logging's registry
    logger.addHandler(Warnings(run))
    pulumi.runtime.settings.ROOT.set(None)  # a fresh root Stack per run
    pulumi.runtime.set_mocks(
        mocks, project=PROJECT["name"], stack="test", preview=False, logger=logger, monitor=Monitor(run, mocks)
    )
    pulumi.runtime.set_all_config({k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()})


def run_program(config: dict[str, Any], existing: dict[str, Any] | None = None) -> Run:
    """Run Pulumi.yaml's program under mocks with this stack config; what it registered, exported and warned.
    `existing`: what getCluster answers about an existing GKE cluster (default: every security setting on)."""
    run = Run()
    _mock(run, config, existing)

    @pulumi.runtime.test
    def program() -> Any:
        with contextlib.chdir(ROOT):  # where Pulumi runs the program: its project's folder
            outputs = runpy.run_path(str(MAIN), run_name="__main__")["outputs"]
        keys = list(outputs)
        values = [pulumi.Output.from_input(outputs[k]) for k in keys]

        async def secrets() -> None:
            for k, v in zip(keys, values):
                run.secret[k] = await v.is_secret()

        return pulumi.Output.all(*values, pulumi.Output.from_input(secrets())).apply(  # type: ignore[arg-type]
            lambda vs: run.outputs.update(zip(keys, vs))
        )

    program()
    return run


def run_error(config: dict[str, Any]) -> tuple[str, Run]:
    """The program's one error for this config, and what it registered before (nothing, it should be)."""
    run = Run()
    with pytest.raises(pulumi.RunError) as err:
        _mock(run, config, None)
        with contextlib.chdir(ROOT):
            pulumi.runtime.test(lambda: runpy.run_path(str(MAIN), run_name="__main__") and None)()
    return str(err.value), run


def config_for(path: Path, provider: str) -> dict[str, Any]:
    return {
        "jaxinfra:stack": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
        **PROVIDERS[provider],
    }


def root_config(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / f"Pulumi.{name}.yaml").read_text())["config"]


def write_stack(tmp_path: Path, body: str, name: str = "custom") -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text("from jaxinfra import CPU, GPU, TPU, Cluster, JaxJob, NodePool\n" + textwrap.dedent(body))
    return path


def secret(value: Any) -> dict[str, Any]:
    """How a secret input reaches the engine."""
    return {rpc._special_sig_key: rpc._special_secret_sig, "value": value}
