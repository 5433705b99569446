"""One invocation, one cluster: every YAML file and folder on a `jaxinfra simulate` command line is applied
to the same cluster, as `kubectl apply -f a.yaml -f b.yaml` / `-f DIR -R` would; each stack is its own.

The manifests are written here in the style of upstream examples, not copied: JAX's Kubernetes CI (an
Indexed Job with a bare `jax.distributed.initialize()`, its ServiceAccount and RBAC applied from another
file), Kueue's sample Job with its queue setup in another file, and a Kubeflow TrainJob whose
ClusterTrainingRuntime comes from another file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra.errors import ManifestError
from jaxinfra.invocation import sources as _sources
from jaxinfra.manifest_paths import expand
from jaxinfra_sim.cluster import engine, sources
from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.core.results import Report
from tests.support.cli import simulate_cli
from tests.support.paths import ROOT

pytestmark = pytest.mark.simulator


def simulate(*args: str, tmp: Path, timeout: float = 150) -> tuple[int, dict[str, Any], str]:
    return simulate_cli(*args, tmp=tmp, timeout=timeout)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def plan(*paths: Path, check_all: bool = False) -> Report:
    """What `jaxinfra simulate PATHS` finds before anything runs (--run-command unless `check_all`)."""
    return engine._plan(_sources(list(paths), None), check_all=check_all)


# --- JAX's Kubernetes CI: the job in one file, its ServiceAccount and RBAC in another ---------------

CI_RBAC = """\
# What the CI applies first: the identity the training pods run as, allowed to read what
# jax.distributed's Kubernetes detection reads (its pod, its Job, its Service).
apiVersion: v1
kind: ServiceAccount
metadata:
  name: jax-ci-runner
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: jax-ci-discovery
rules:
- apiGroups: [""]
  resources: [pods, services]
  verbs: [get, list, watch]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: jax-ci-discovery
subjects:
- kind: ServiceAccount
  name: jax-ci-runner
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: jax-ci-discovery
"""

CI_JOB = """\
# Then the job: two processes that find each other through the Kubernetes API.
apiVersion: v1
kind: Service
metadata:
  name: jax-ci-hosts
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector:
    job-name: jax-ci-smoke
---
apiVersion: batch/v1
kind: Job
metadata:
  name: jax-ci-smoke
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  backoffLimit: 0
  template:
    spec:
      serviceAccountName: jax-ci-runner
      subdomain: jax-ci-hosts
      restartPolicy: Never
      containers:
      - name: jax
        image: local/jax-k8s:ci
        command: [python, -c]
        args:
        - |
          import jax
          jax.distributed.initialize(initialization_timeout=60)
          assert jax.process_count() == 2, jax.process_count()
          print("process", jax.process_index(), "sees", jax.device_count(), "devices")
          jax.distributed.shutdown()
"""


def test_the_job_and_its_service_account_from_two_files_are_one_cluster(tmp_path: Path) -> None:
    rbac, job = write(tmp_path / "svc-acct.yaml", CI_RBAC), write(tmp_path / "job.yaml", CI_JOB)
    rc, report, out = simulate(str(rbac), str(job), "--run-command", tmp=tmp_path)
    assert rc == 0, out
    [w] = report["workloads"]
    assert (w["id"], w["source"], w["verdict"]) == ("Job/default/jax-ci-smoke", str(job), "succeeded")
    assert report["inputs"] == {
        str(rbac): [
            "ServiceAccount/default/jax-ci-runner",
            "Role/default/jax-ci-discovery",
            "RoleBinding/default/jax-ci-discovery",
        ],
        str(job): ["Service/default/jax-ci-hosts", "Job/default/jax-ci-smoke"],
    }
    # the pods read the API as jax-ci-runner, allowed by the RoleBinding of the other file
    assert any(line.startswith("200 GET /api/v1/namespaces/default/pods") for line in report["api_server"])
    assert f"from {rbac}: ServiceAccount/default/jax-ci-runner" in out  # the summary says which file held what
    assert f"{job}: Job/default/jax-ci-smoke: succeeded" in out


def test_the_job_file_alone_is_refused_at_admission(tmp_path: Path) -> None:
    job = write(tmp_path / "job.yaml", CI_JOB)
    rc, report, _ = simulate(str(job), "--run-command", tmp=tmp_path)
    assert rc == 1
    [w] = report["workloads"]
    assert w["source"] == str(job) and w["attempts"] == []
    [problem] = w["problems"]
    assert 'serviceaccount "jax-ci-runner" not found' in problem["message"]


# --- Kueue: the sample workload in one file, the queue setup in another -----------------------------

QUEUES = """\
# A cluster admin's queue setup: one flavor, one ClusterQueue open to every namespace, one LocalQueue.
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: ci-flavor
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-cq
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: ci-flavor
      resources:
      - name: cpu
        nominalQuota: 4
      - name: memory
        nominalQuota: 8Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: team-queue
  namespace: default
spec:
  clusterQueue: team-cq
"""

QUEUED_JOB = """\
# A user's job, created suspended and labelled with the LocalQueue that Kueue admits it through.
apiVersion: batch/v1
kind: Job
metadata:
  name: queued-smoke
  labels:
    kueue.x-k8s.io/queue-name: team-queue
spec:
  suspend: true
  completionMode: Indexed
  completions: 1
  parallelism: 1
  backoffLimit: 0
  template:
    spec:
      automountServiceAccountToken: false
      restartPolicy: Never
      containers:
      - name: main
        image: python:3.11
        command: [python, -c, "print('admitted and running')"]
        resources:
          requests:
            cpu: 500m
            memory: 256Mi
"""

ADMITTED = (
    "admitted by Kueue to ClusterQueue team-cq via LocalQueue default/team-queue (ci-flavor: cpu 0.5 of 4, "
    "memory 256Mi of 8Gi)"
)


def test_a_kueue_workload_is_admitted_by_queues_from_a_folder_and_runs(tmp_path: Path) -> None:
    """The files in a folder (nested, as `kubectl apply -f DIR -R` reads it), not one by one: the same cluster."""
    folder = tmp_path / "deploy"
    write(folder / "kueue" / "queues.yaml", QUEUES)
    job = write(folder / "workloads" / "job.yml", QUEUED_JOB)
    rc, report, out = simulate(str(folder), "--run-command", tmp=tmp_path)
    assert rc == 0, out
    [w] = report["workloads"]
    assert (w["source"], w["verdict"], w["notes"]) == (str(job), "succeeded", [ADMITTED])
    assert list(report["inputs"]) == [str(folder / "kueue" / "queues.yaml"), str(job)]


def test_without_its_queue_file_kueue_admission_is_not_checked(tmp_path: Path) -> None:
    job = write(tmp_path / "job.yaml", QUEUED_JOB)
    [r] = plan(job).results
    assert r.workload.notes[0].startswith("Kueue admission not checked")
    [r] = plan(write(tmp_path / "queues.yaml", QUEUES), job).results
    assert r.workload.notes == (ADMITTED,) and r.source == str(job)


# --- Kubeflow Trainer: a TrainJob and the ClusterTrainingRuntime it references, in two files ---------

RUNTIME = """\
# This cluster's own jax-distributed runtime (it replaces the one installed with the Trainer):
# two nodes by default, and an env var of its own on the trainer container.
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: jax-distributed
  labels:
    trainer.kubeflow.org/framework: jax
spec:
  mlPolicy:
    numNodes: 2
    jax: {}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: trainer
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: python:3.11
                  env:
                  - name: RUNTIME_FLAVOR
                    value: site-cpu
"""

TRAINJOB = """\
# A TrainJob that takes its node count from the runtime.
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: mnist-smoke
spec:
  runtimeRef:
    name: jax-distributed
  trainer:
    command: [python3, -c]
    args:
    - |
      import os, jax
      assert os.environ["RUNTIME_FLAVOR"] == "site-cpu", "not the runtime of the other file"
      jax.distributed.initialize(coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
                                 num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
                                 process_id=int(os.environ["JAX_PROCESS_ID"]), initialization_timeout=30)
      assert jax.process_count() == 2
      jax.distributed.shutdown()
"""


def test_a_trainjob_uses_the_runtime_of_the_other_file(tmp_path: Path) -> None:
    runtime, trainjob = write(tmp_path / "runtime.yaml", RUNTIME), write(tmp_path / "trainjob.yaml", TRAINJOB)
    rc, report, out = simulate(str(runtime), str(trainjob), "--run-command", tmp=tmp_path)
    assert rc == 0, out
    [w] = report["workloads"]
    assert (w["source"], w["pods"], w["verdict"]) == (str(trainjob), 2, "succeeded")
    # alone, the TrainJob gets the built-in upstream jax-distributed: one node, without the env var
    [r] = plan(trainjob).results
    assert len(r.workload.pods) == 1 and "RUNTIME_FLAVOR" not in r.workload.pods[0].env


# --- folders: walked as kubectl walks them -----------------------------------------------------------


def test_a_folder_is_its_manifest_files_in_walk_order(tmp_path: Path) -> None:
    root = tmp_path / "d"
    for name in ["b.yaml", "a/z.json", "a/y.YAML", "a-b.yml", "a/.hidden.yaml", "notes.txt", "c.py"]:
        write(root / name, "")
    (root / "link").symlink_to(root / "a")  # a symlink to a folder is not followed
    problems: list = []
    # filepath.Walk: each folder's entries sorted by name, depth first ("a" before "a-b.yml"); extensions case-sensitive
    assert [p.relative_to(root).as_posix() for p in expand([root], problems)] == [
        "a/.hidden.yaml",
        "a/z.json",
        "a-b.yml",
        "b.yaml",
    ]
    assert expand([root / "b.yaml", root, root / "notes.txt"], problems)[:2] == [
        root / "b.yaml",
        root / "a" / ".hidden.yaml",
    ]
    assert (
        root / "notes.txt" in expand([root / "notes.txt"], problems) and problems == []
    )  # a file given is read, whatever its name


def test_a_folder_is_the_same_cluster_as_its_files_given_one_by_one(tmp_path: Path) -> None:
    folder = tmp_path / "ci"
    files = [
        write(folder / "01-rbac" / "svc-acct.yaml", CI_RBAC),
        write(folder / "02-job.yaml", CI_JOB),
        write(folder / "kueue" / "queues.yaml", QUEUES),
        write(folder / "kueue" / "workload.yaml", QUEUED_JOB),
    ]
    [by_folder], [by_files] = _sources([folder], None), _sources(files, None)
    assert (by_folder.manifests, by_folder.files) == (by_files.manifests, by_files.files)
    a, b = plan(folder), plan(*files)
    assert [(r.source, r.workload) for r in a.results] == [(r.source, r.workload) for r in b.results]
    assert a.inputs == b.inputs and a.problems == b.problems == ()


def test_an_empty_folder_and_an_unreadable_file_are_input_problems(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ManifestError) as err:
        _sources([tmp_path / "empty", tmp_path / "missing.yaml"], None)
    assert [p.where for p in err.value.problems] == [str(tmp_path / "empty"), str(tmp_path / "missing.yaml")]


# --- objects applied twice: the later apply wins, except for a workload -------------------------------


def test_a_later_definition_of_an_object_wins_with_a_note(tmp_path: Path) -> None:
    job = write(tmp_path / "job.yaml", CI_JOB)
    tighter = QUEUES.replace("nominalQuota: 4", 'nominalQuota: "0.25"')  # int-or-string: a bare 0.25 is refused
    first, second = write(tmp_path / "a" / "queues.yaml", QUEUES), write(tmp_path / "b" / "queues.yaml", tighter)
    report = plan(
        write(tmp_path / "svc-acct.yaml", CI_RBAC), first, second, job, write(tmp_path / "w.yaml", QUEUED_JOB)
    )
    assert f"ClusterQueue/team-cq defined in {first} and {second}: the later apply wins" in report.notes
    assert (
        f"ResourceFlavor/ci-flavor defined in {first} and {second}, identically: the second apply changes nothing"
        in report.notes
    )
    # the later ClusterQueue decides: its quota is short, and the problem names its file
    assert report.inputs[str(second)] == ["ClusterQueue/team-cq"]
    [queued] = [r for r in report.results if r.workload.name == "queued-smoke"]
    [problem] = queued.workload.problems
    assert "current podset request (500m) > maximum capacity (250m)" in problem.message


def test_a_workload_defined_twice_differently_is_a_problem_in_one_file_or_two(tmp_path: Path) -> None:
    one = write(tmp_path / "one.yaml", CI_JOB + "---\n" + CI_JOB.replace("backoffLimit: 0", "backoffLimit: 2"))
    [problem] = plan(write(tmp_path / "svc-acct.yaml", CI_RBAC), one).problems
    assert (problem.file, problem.path) == (str(one), "Job/default/jax-ci-smoke")
    assert f"defined more than once, differently (twice in {one})" in problem.message
    # the document is the second definition's, as a YAML file counts them
    assert problem.document is not None
    assert list(yaml.safe_load_all(one.read_text()))[problem.document]["spec"]["backoffLimit"] == 2
    again = write(tmp_path / "again.yaml", CI_JOB.replace("completions: 2", "completions: 1"))
    job = write(tmp_path / "job.yaml", CI_JOB)
    [problem] = plan(job, again).problems
    assert (problem.file, problem.path, problem.value) == (
        str(again),
        "Job/default/jax-ci-smoke",
        [str(job), str(again)],
    )
    assert (
        problem.document is not None and list(yaml.safe_load_all(again.read_text()))[problem.document]["kind"] == "Job"
    )
    # the same file twice is applied once; an identical copy changes nothing
    copy = write(tmp_path / "copy.yaml", CI_JOB)
    report = plan(write(tmp_path / "svc-acct.yaml", CI_RBAC), job, job, copy)
    assert report.problems == () and len(report.results) == 1
    assert (
        f"Job/default/jax-ci-smoke defined in {job} and {copy}, identically: the second apply changes nothing"
        in report.notes
    )


def test_problems_name_the_file_of_their_object(tmp_path: Path) -> None:
    odd = write(
        tmp_path / "extra.yaml",
        "apiVersion: batch/v1\nkind: Widget\nmetadata: {name: w}\n---\napiVersion: v1\nmetadata: {name: kindless}\n",
    )
    broken = write(tmp_path / "trainjob.yaml", TRAINJOB.replace("name: jax-distributed", "name: jax-distributd"))
    paths = [p.where for p in plan(write(tmp_path / "job.yaml", CI_JOB), odd, broken).problems]
    assert paths == [
        f"{odd}#0 Widget/w kind",
        f"{odd}#1 ?/kindless kind",
        f"{broken}#0 TrainJob/mnist-smoke spec.RuntimeRef",
    ]


# --- stacks stay clusters of their own ----------------------------------------------------------------


def test_a_stack_is_a_cluster_of_its_own_beside_the_yaml(tmp_path: Path) -> None:
    rbac = write(tmp_path / "svc-acct.yaml", CI_RBAC)
    stack, yaml_cluster = _sources([ROOT / "stacks" / "cpu_dev.py", rbac], None)
    assert stack.name == str(ROOT / "stacks" / "cpu_dev.py") and set(stack.files) == {stack.name}
    assert (yaml_cluster.name, set(yaml_cluster.files)) == (str(rbac), {str(rbac)})
    report = engine._plan([stack, yaml_cluster], check_all=True)
    assert [r.source for r in report.results] == [stack.name]
    assert any(n.startswith(f"{rbac}: no workload here; each stack file is a cluster of its own") for n in report.notes)


def test_emulating_the_applied_cluster_equals_emulating_its_objects(tmp_path: Path) -> None:
    items = [("a.yaml", i, d) for i, d in enumerate(yaml.safe_load_all(CI_RBAC))]
    items += [("b.yaml", i, d) for i, d in enumerate(yaml.safe_load_all(CI_JOB))]
    source = sources.applied("a.yaml, b.yaml", items)
    assert source.notes == source.problems == () and list(source.manifests) == [d for _, _, d in items]
    assert source.documents == tuple(i for _, i, _ in items)
    assert emulate(source.manifests).workloads == emulate([d for _, _, d in items]).workloads


# --- validate takes the same inputs -------------------------------------------------------------------


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jaxinfra", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_validate_takes_folders_recursively(tmp_path: Path) -> None:
    folder = tmp_path / "ci"
    write(folder / "rbac" / "svc-acct.yaml", CI_RBAC)
    write(folder / "job.yaml", CI_JOB)
    write(folder / "README.md", "not a manifest")
    r = run("validate", str(folder))
    assert r.returncode == 0 and "2 files valid" in r.stderr, r.stderr
    write(
        folder / "rbac" / "deep" / "bad.json",
        json.dumps({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "x"}, "typo": 1}),
    )
    r = run("validate", str(folder))
    assert r.returncode == 2 and f"error: {folder / 'rbac' / 'deep' / 'bad.json'}#0 ServiceAccount/x" in r.stderr, (
        r.stderr
    )
    (tmp_path / "empty").mkdir()
    r = run("validate", str(tmp_path / "empty"))
    assert r.returncode == 2 and "no .json, .yaml or .yml file in this folder" in r.stderr
