"""JobSets in the style of JobSet's docs examples and Indexed Jobs in the style of the Kubernetes docs' (busybox
containers running a shell line), and running one through `jaxinfra simulate --run-command` as a user would: what
the controller-semantics tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jaxinfra.yamlio import dump
from tests.support.cli import simulate_cli


def rjob(
    name: str,
    command: str,
    replicas: int = 1,
    pods: int = 1,
    pod_rules: list[dict[str, Any]] | None = None,
    **job: Any,
) -> dict[str, Any]:
    """A replicatedJob of `replicas` Indexed Jobs of `pods` pods each running `sh -c COMMAND`; each Job fails at its
    first failed pod (backoffLimit 0, restartPolicy Never) unless `job` says otherwise (its spec's fields)."""
    container = {"name": name, "image": "busybox:1.36", "command": ["sh", "-c", command]}
    spec: dict[str, Any] = {
        "parallelism": pods,
        "completions": pods,
        "backoffLimit": 0,
        "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
    }
    if pod_rules is not None:
        spec["podFailurePolicy"] = {"rules": pod_rules}
    for key, value in job.items():
        where = spec["template"]["spec"] if key == "restartPolicy" else spec  # the pod's, else the Job's
        if value is None:
            where.pop(key, None)  # left for the API server's or the webhook's default
        else:
            where[key] = value
    return {"name": name, "replicas": replicas, "template": {"spec": spec}}


def indexed_job(name: str, pod: dict[str, Any], pods: int, **spec: Any) -> dict[str, Any]:
    """An Indexed Job `name` of `pods` pods (parallelism = completions unless `spec` says otherwise) with the pod spec
    `pod` and `spec`'s fields."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": pods,
            "parallelism": pods,
            "completionMode": "Indexed",
            **spec,
            "template": {"spec": pod},
        },
    }


def jobset(name: str, *rjobs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A JobSet of `rjobs`, with `spec`'s fields (failurePolicy, successPolicy, ...) beside them."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {**spec, "replicatedJobs": list(rjobs)},
    }


def run(tmp_path: Path, manifest: dict[str, Any], *extra: str, timeout: str = "60") -> tuple[int, dict[str, Any], str]:
    """`jaxinfra simulate FILE --run-command --timeout TIMEOUT EXTRA...` on `manifest`: status, JSON report, output."""
    (tmp_path / "jobset.yaml").write_text(dump([manifest]))
    return simulate_cli(str(tmp_path / "jobset.yaml"), "--run-command", "--timeout", timeout, *extra, tmp=tmp_path)


def only_workload(tmp_path: Path, manifest: dict[str, Any], *extra: str, timeout: str = "60") -> dict[str, Any]:
    """The one workload's report after `run`, checked to exit as its verdict says (0 only for "succeeded")."""
    rc, report, out = run(tmp_path, manifest, *extra, timeout=timeout)
    [workload] = report["workloads"]
    assert rc == (0 if workload["verdict"] == "succeeded" else 1), out
    return workload
