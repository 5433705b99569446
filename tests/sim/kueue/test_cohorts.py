"""Kueue's cohorts, as the simulator's Kueue plays them (issue #42): a ClusterQueue in a cohort may borrow what its
cohort's other members do not use, up to its `borrowingLimit`, and each member lends at most its `lendingLimit`;
a Cohort object adds its own quota and what its parent lends (kubernetes-sigs/kueue v0.19.2 pkg/cache/scheduler/
resource_node.go `potentialAvailable`). Past the most a queue may ever take, the workload stays pending with Kueue's
ExceedsMaxQuota message (pkg/scheduler/flavorassigner/flavorassigner.go `fitsResourceQuota`). The manifests follow
the two-team example of Kueue's docs (concepts/cluster_queue, "Cohort", "BorrowingLimit", "LendingLimit"), written
here."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.core.inputs import Objects
from jaxinfra_sim.kueue.cohorts import Cohorts, Node
from tests.support.problems import problems_of
from tests.test_front_door import validate_cli

pytestmark = pytest.mark.simulator


def team(name: str, cohort: str | None, cpu: str, **limits: str) -> str:
    """A team's ClusterQueue over the shared flavor, `cpu` nominal, its limits (borrowingLimit, lendingLimit)."""
    extra = "".join(f", {k}: {v}" for k, v in limits.items())
    return f"""---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  namespaceSelector: {{}}{f"{chr(10)}  cohortName: {cohort}" if cohort else ""}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources: [{{name: cpu, nominalQuota: {cpu}{extra}}}]
"""


FLAVOR_AND_QUEUE = """---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-a, namespace: default}
spec: {clusterQueue: team-a-cq}
"""
JOB = """---
apiVersion: batch/v1
kind: Job
metadata:
  name: sweep
  labels: {kueue.x-k8s.io/queue-name: team-a}
spec:
  suspend: true
  completionMode: Indexed
  parallelism: 3
  completions: 3
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: python:3.11
        command: [python, -c, "print('trained')"]
        resources:
          requests: {cpu: "2"}
"""
"""3 pods x 2 cpu: 6 cpu, more than team A's nominal 4."""


def docs(*queues: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(FLAVOR_AND_QUEUE + "".join(queues) + JOB) if d]


def verdict(*queues: str) -> tuple[str, ...]:
    """The Job's Kueue note where admitted, else its one problem's message and fix."""
    cluster = emulate(docs(*queues), check_all=False)
    problems = problems_of(cluster)
    if problems:
        [problem] = problems
        return problem.message, problem.fix
    [w] = cluster.workloads
    return w.notes


def test_a_queue_borrows_its_cohort_siblings_unused_quota() -> None:
    [note] = verdict(team("team-a-cq", "team-ab", "4"), team("team-b-cq", "team-ab", "4"))
    assert note == (
        "admitted by Kueue to ClusterQueue team-a-cq via LocalQueue default/team-a "
        "(default-flavor: cpu 6 of 4, borrowing 2 in cohort team-ab)"
    ), note


def test_without_a_cohort_or_with_borrowing_limit_0_it_stays_pending_with_kueues_message() -> None:
    message, fix = verdict(team("team-a-cq", None, "4"), team("team-b-cq", None, "4"))
    assert message == (
        "would stay suspended: ClusterQueue team-a-cq: insufficient quota for cpu in flavor default-flavor, previously "
        "considered podsets requests (0) + current podset request (6) > maximum capacity (4)"
    ), message
    assert "put it in a cohort with quota to lend" in fix, fix
    message, fix = verdict(team("team-a-cq", "team-ab", "4", borrowingLimit="0"), team("team-b-cq", "team-ab", "4"))
    assert "current podset request (6) > maximum capacity (4)" in message, message
    assert "(nominal quota and what cohort team-ab lends, all 3 pods at once)" in message, message
    assert fix.startswith("raise ClusterQueue team-a-cq's nominalQuota or its borrowingLimit"), fix
    [note] = verdict(team("team-a-cq", "team-ab", "4", borrowingLimit="2"), team("team-b-cq", "team-ab", "4"))
    assert "cpu 6 of 4, borrowing 2 in cohort team-ab" in note, note


def test_a_siblings_lending_limit_caps_what_it_lends() -> None:
    message, _ = verdict(team("team-a-cq", "team-ab", "4"), team("team-b-cq", "team-ab", "4", lendingLimit="0"))
    assert "current podset request (6) > maximum capacity (4)" in message, message
    message, _ = verdict(team("team-a-cq", "team-ab", "4"), team("team-b-cq", "team-ab", "4", lendingLimit="1"))
    assert "current podset request (6) > maximum capacity (5)" in message, message
    [note] = verdict(team("team-a-cq", "team-ab", "4"), team("team-b-cq", "team-ab", "4", lendingLimit="2"))
    assert "borrowing 2 in cohort team-ab" in note, note


def test_a_queues_own_lending_limit_keeps_its_quota_for_itself() -> None:
    """What a queue keeps (its nominal past its lendingLimit) stays its own: lending nothing, it still takes all of its
    nominal quota and borrows on top (kueue `localQuota` + the cohort's `potentialAvailable`)."""
    [note] = verdict(team("team-a-cq", "team-ab", "4", lendingLimit="0"), team("team-b-cq", "team-ab", "2"))
    assert "cpu 6 of 4, borrowing 2 in cohort team-ab" in note, note


def test_a_cohort_object_adds_its_quota_and_its_parents() -> None:
    """Hierarchical cohorts: team-ab has no quota of its own but a parent, org, whose Cohort object holds 2 cpu."""
    org = """---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: team-ab}
spec: {parentName: org}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: 2}]
"""
    [note] = verdict(team("team-a-cq", "team-ab", "4"), org)
    assert "cpu 6 of 4, borrowing 2 in cohort team-ab" in note, note
    message, _ = verdict(team("team-a-cq", "team-ab", "3"), org)
    assert "current podset request (6) > maximum capacity (5)" in message, message


def test_the_most_a_queue_may_take_follows_kueues_resource_tree() -> None:
    """Cohorts.most against the arithmetic of kueue resource_node.go, on a cohort of three queues: a (nominal 4,
    borrowingLimit 1), b (nominal 5, lendingLimit 2), c (nominal 1, lendingLimit 0); the cohort lends-in 4 + 2 + 0."""
    objects = Objects()
    queues = team("a", "ab", "4", borrowingLimit="1") + team("b", "ab", "5", lendingLimit="2")
    for obj in yaml.safe_load_all(queues + team("c", "ab", "1", lendingLimit="0")):
        objects.add(obj)
    cohorts, fr = Cohorts(objects), ("default-flavor", "cpu")
    assert cohorts.subtree((Node.COHORT, "ab"), fr) == 6  # a lends 4, b 2, c 0
    assert cohorts.most((Node.CLUSTER_QUEUE, "a"), fr) == 5  # min(4 + 1 borrowed, 0 kept + 6)
    assert cohorts.most((Node.CLUSTER_QUEUE, "b"), fr) == 9  # 3 kept + 6
    assert cohorts.most((Node.CLUSTER_QUEUE, "c"), fr) == 7  # 1 kept + 6
    assert cohorts.most((Node.CLUSTER_QUEUE, "a"), ("other-flavor", "cpu")) == Fraction(0)


def test_the_cohort_manifests_validate(tmp_path: Path) -> None:
    path = tmp_path / "cohort.yaml"
    path.write_text(
        FLAVOR_AND_QUEUE
        + team("team-a-cq", "team-ab", "4", borrowingLimit="2")
        + team("team-b-cq", "team-ab", "4", lendingLimit="1")
    )
    rc, out = validate_cli(path)
    assert rc == 0, out
    path.write_text(FLAVOR_AND_QUEUE + team("team-a-cq", "team-ab", "4", borrowingLimt="2"))
    rc, out = validate_cli(path)
    assert rc == 2 and "borrowingLimt" in out, out


def test_a_job_admitted_by_borrowing_runs(tmp_path: Path) -> None:
    """End to end: the 6-cpu Job on team A's 4 cpu runs once Kueue admits it by borrowing from team B."""
    from tests.support.cli import simulate_cli

    path = tmp_path / "teams.yaml"
    path.write_text(FLAVOR_AND_QUEUE + team("team-a-cq", "team-ab", "4") + team("team-b-cq", "team-ab", "4") + JOB)
    rc, report, out = simulate_cli(str(path), "--run-command", tmp=tmp_path)
    [w] = report["workloads"]
    assert (rc, w["verdict"], len(w["attempts"][0]["pods"])) == (0, "succeeded", 3), out
    assert any("borrowing 2 in cohort team-ab" in n for n in w["notes"]), w["notes"]
    path.write_text(
        FLAVOR_AND_QUEUE
        + team("team-a-cq", "team-ab", "4", borrowingLimit="0")
        + team("team-b-cq", "team-ab", "4")
        + JOB
    )
    rc, report, out = simulate_cli(str(path), "--run-command", tmp=tmp_path)
    assert rc != 0 and "current podset request (6) > maximum capacity (4)" in out, out
    assert report.get("workloads", [{}])[0].get("attempts", []) == [], "nothing ran"


def test_a_hostile_cohort_tree_costs_linear_time_and_a_cycle_is_cut() -> None:
    """5,000 nested Cohorts each lending 1 cpu, and a cycle of two: Kueue refuses to build a cycle (ErrCohortHasCycle);
    here it is cut where it closes, and the deep chain is walked without recursion."""
    import time

    objects = Objects()
    depth = 5000
    for i in range(depth):
        objects.add(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Cohort",
                "metadata": {"name": f"c{i}"},
                "spec": {
                    **({"parentName": f"c{i + 1}"} if i + 1 < depth else {}),
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": 1}]}],
                        }
                    ],
                },
            }
        )
    for obj in yaml.safe_load_all(team("a", "c0", "4") + team("x", "loop-1", "4")):
        objects.add(obj)
    for name, up in (("loop-1", "loop-2"), ("loop-2", "loop-1")):
        objects.add(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Cohort",
                "metadata": {"name": name},
                "spec": {"parentName": up},
            }
        )
    start = time.monotonic()
    cohorts, fr = Cohorts(objects), ("default-flavor", "cpu")
    assert cohorts.most((Node.CLUSTER_QUEUE, "a"), fr) == 4 + depth
    assert cohorts.most((Node.CLUSTER_QUEUE, "x"), fr) == 4
    assert time.monotonic() - start < 5
