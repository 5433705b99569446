"""Kueue's ClusterQueue quota among workloads that run side by side (`jaxinfra_sim.kueue.quotas`): what one admitted
workload uses is not there for the next until it ends; a ClusterQueue's queueingStrategy decides whether one that fits
may go past one ahead of it that does not (BestEffortFIFO) or not (StrictFIFO); a higher WorkloadPriorityClass goes
first. Queues and Jobs in the style of Kueue's docs ("Run a Kubernetes Job"), written here."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.core.results import WorkloadResult
from jaxinfra_sim.kueue.quotas import Quotas
from tests.sim.cluster.test_fidelity import kueue_queue

pytestmark = pytest.mark.unit


def queued(name: str, cpu: str, priority: str | None = None) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "user-queue"}
    if priority is not None:
        labels["kueue.x-k8s.io/priority-class"] = priority
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "suspend": True,
            "completionMode": "Indexed",
            "completions": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "python:3.11-slim",
                            "command": ["true"],
                            "resources": {"requests": {"cpu": cpu}},
                        }
                    ],
                }
            },
        },
    }


def results(*jobs: dict[str, Any], strategy: str | None = None, extra: tuple[dict, ...] = ()) -> list[WorkloadResult]:
    docs = [*yaml.safe_load_all(kueue_queue(cpu="2")), *extra, *jobs]
    if strategy is not None:
        [cq] = [d for d in docs if d["kind"] == "ClusterQueue"]
        cq["spec"]["queueingStrategy"] = strategy
    cluster = emulate(docs, check_all=False)
    assert all(not w.problems for w in cluster.workloads), [w.problems for w in cluster.workloads]
    return [WorkloadResult("test", w, manifests=docs) for w in cluster.workloads]


def test_an_admitted_workload_holds_its_quota_until_it_ends() -> None:
    first, second = results(queued("first", "2"), queued("second", "1"))
    quotas = Quotas([first, second])
    assert quotas.blocked(first) is None
    quotas.admit(first)
    assert quotas.blocked(second) == (
        "quota in ClusterQueue cluster-queue: cpu 1 of flavor default-flavor beside 2 in use (at most 2)"
    )
    quotas.release(first)
    assert quotas.blocked(second) is None


@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
def test_the_queueing_strategy_decides_whether_a_small_workload_goes_past_a_large_one(strategy: str) -> None:
    running, large, small = results(
        queued("running", "1"), queued("large", "2"), queued("small", "1"), strategy=strategy
    )
    quotas = Quotas([running, large, small])
    quotas.admit(running)
    assert quotas.blocked(large) is not None
    if strategy == "BestEffortFIFO":
        assert quotas.blocked(small) is None
    else:
        assert quotas.blocked(small) == (
            "its turn in ClusterQueue cluster-queue (StrictFIFO): Job/default/large, ahead of it, was waiting"
        )


def test_a_higher_priority_goes_first() -> None:
    high: dict[str, Any] = {  # kueue's WorkloadPriorityClass: `value` beside metadata, as a PriorityClass has it
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
    }
    low, urgent = results(queued("low", "2"), queued("urgent", "2", priority="high"), extra=(high,))
    quotas = Quotas([low, urgent])
    assert sorted([low, urgent], key=quotas.order) == [urgent, low]
    first, second = results(queued("first", "2"), queued("second", "2"))  # the same priority: the inputs' order
    assert sorted([second, first], key=Quotas([first, second]).order) == [first, second]
