"""The escape hatch (issue #23 item 4): what a team adds to the pods jaxinfra renders, the same on every backend.

Typed extras (priority class, tolerations, node selector, native sidecars) and RFC 6902 pod patches land in the pod
template each backend embeds, after jaxinfra's own fields; a job without them renders exactly as before; wrong ones
are spec problems with their path and fix; admission sees the result; `explain` says what was changed.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from jaxinfra import CPU, TPU, Cluster, JaxJob, NodePool, Sidecar, SpecError, Toleration, manifests
from jaxinfra.explain import facts, render_explanation
from jaxinfra.plan import plan
from jaxinfra.shadow import shadow
from jaxinfra.validate import validate_objects
from jaxinfra.yamlio import dump

pytestmark = pytest.mark.unit

BACKENDS = ("jobset", "job", "jaxjob", "trainjob")

#: Every typed extra at once, as a team would write them.
EXTRAS: dict[str, Any] = {
    "priority_class": "research-high",
    "tolerations": [
        Toleration("dedicated", value="ml", effect="NoSchedule"),
        Toleration("node.kubernetes.io/unreachable", operator="Exists", effect="NoExecute", toleration_seconds=30),
    ],
    "node_selector": {"team": "ml", "disk": "ssd"},
    "sidecars": [
        Sidecar(
            "log-shipper",
            "fluent/fluent-bit:3.1",
            args=["-c", "/conf.yaml"],
            env={"LEVEL": "info"},
            resources={"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        )
    ],
}

#: Patches whose paths exist in every backend's pod template; the `test` ops check they run after the typed extras.
PATCHES: list[dict[str, Any]] = [
    {"op": "test", "path": "/spec/priorityClassName", "value": "research-high"},
    {"op": "add", "path": "/spec/terminationGracePeriodSeconds", "value": 120},
    {"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "Always"},
    {"op": "add", "path": "/metadata/labels/team", "value": "ml"},
    {"op": "replace", "path": "/spec/initContainers/0/image", "value": "fluent/fluent-bit:3.2"},
]


def cluster(
    backend: str = "jobset", pool: Any = None, spot: bool = False, shadowed: bool = False, **job: Any
) -> Cluster:
    c = Cluster(
        name="c",
        node_pools=[NodePool("pool", pool or CPU(4), spot=spot)],
        jobs=[JaxJob("train", image="img", node_pool="pool", backend=backend, **job)],
    )
    return shadow(c) if shadowed else c


def pod_template(objects: list[dict[str, Any]], backend: str) -> dict[str, Any]:
    """The pod template inside each backend's workload (the TrainingRuntime's for trainjob)."""
    by_kind = {m["kind"]: m for m in objects}
    if backend == "jobset":
        return by_kind["JobSet"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    if backend == "job":
        return by_kind["Job"]["spec"]["template"]
    if backend == "jaxjob":
        return by_kind["JAXJob"]["spec"]["jaxReplicaSpecs"]["Worker"]["template"]
    return by_kind["TrainingRuntime"]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


def spec_problems(**job: Any) -> list[str]:
    with pytest.raises(SpecError) as err:
        cluster(**job)
    return [str(p) for p in err.value.problems]


def render_problems(**job: Any) -> list[str]:
    c = cluster(**job)  # a valid spec: whether a patch applies is known once the pod template is rendered
    with pytest.raises(SpecError) as err:
        manifests(c)
    return [str(p) for p in err.value.problems]


@pytest.mark.parametrize("backend", BACKENDS)
def test_defaults_render_exactly_as_before(backend: str) -> None:
    plain = manifests(cluster(backend))
    empty = manifests(
        cluster(backend, priority_class=None, tolerations=[], node_selector={}, sidecars=[], pod_patches=[])
    )
    assert dump(empty) == dump(plain)
    spec = pod_template(plain, backend)["spec"]
    assert not {"priorityClassName", "initContainers", "nodeSelector", "tolerations"} & set(spec)
    assert facts(plan(cluster(backend)).jobs[0]) == facts(plan(cluster(backend, pod_patches=[])).jobs[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_typed_extras_land_in_every_backends_pod_template(backend: str) -> None:
    objects = manifests(cluster(backend, spot=True, **EXTRAS))
    spec = pod_template(objects, backend)["spec"]
    assert spec["priorityClassName"] == "research-high"
    # the pool's own placement first (Spot), then the job's: merged, not replaced
    assert spec["nodeSelector"] == {"cloud.google.com/gke-spot": "true", "team": "ml", "disk": "ssd"}
    assert spec["tolerations"] == [
        {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    ]
    assert spec["initContainers"] == [
        {
            "name": "log-shipper",
            "image": "fluent/fluent-bit:3.1",
            "restartPolicy": "Always",
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            "args": ["-c", "/conf.yaml"],
            "env": [{"name": "LEVEL", "value": "info"}],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        }
    ]
    assert [c["name"] for c in spec["containers"]] == ["node" if backend == "trainjob" else "jax"]
    assert validate_objects(objects) == []


def test_typed_extras_keep_the_pools_accelerator_placement() -> None:
    spec = pod_template(manifests(cluster("jobset", pool=TPU("v5e", "2x4"), **EXTRAS)), "jobset")["spec"]
    assert spec["nodeSelector"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
        "cloud.google.com/gke-tpu-topology": "2x4",
        "team": "ml",
        "disk": "ssd",
    }
    assert [t["key"] for t in spec["tolerations"]] == ["google.com/tpu", "dedicated", "node.kubernetes.io/unreachable"]


def test_a_shadow_drops_the_node_selector_and_keeps_the_rest() -> None:
    objects = manifests(cluster("jobset", pool=TPU("v5e", "2x4"), shadowed=True, **EXTRAS))
    spec = pod_template(objects, "jobset")["spec"]
    assert "nodeSelector" not in spec  # CPU nodes need not carry the accelerator nodes' labels
    assert [t["key"] for t in spec["tolerations"]] == ["dedicated", "node.kubernetes.io/unreachable"]
    assert spec["priorityClassName"] == "research-high" and spec["initContainers"][0]["name"] == "log-shipper"
    [line] = [v for k, v in facts(plan(cluster("jobset", shadowed=True, **EXTRAS)).jobs[0]) if k == "customized"]
    assert "node selector team=ml, disk=ssd (dropped by the CPU shadow)" in line
    # a patch written against the node selector therefore fails in the shadow, and says so
    retarget = [{"op": "replace", "path": "/spec/nodeSelector/team", "value": "infra"}]
    [shadowed] = render_problems(shadowed=True, node_selector={"team": "ml"}, pod_patches=retarget)
    assert (
        "replace '/spec/nodeSelector/team' on backend jobset's pod template (a CPU shadow): /spec has no 'nodeSelector'"
    ) in shadowed
    real = manifests(cluster(node_selector={"team": "ml"}, pod_patches=retarget))
    assert pod_template(real, "jobset")["spec"]["nodeSelector"] == {"team": "infra"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_pod_patches_apply_to_the_pod_template_after_the_typed_extras(backend: str) -> None:
    before = pod_template(manifests(cluster(backend, **EXTRAS)), backend)
    objects = manifests(cluster(backend, **EXTRAS, pod_patches=PATCHES))
    after = pod_template(objects, backend)
    assert after["spec"]["terminationGracePeriodSeconds"] == 120
    assert after["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert after["metadata"]["labels"]["team"] == "ml"
    assert after["spec"]["initContainers"][0]["image"] == "fluent/fluent-bit:3.2"
    assert after["spec"]["priorityClassName"] == before["spec"]["priorityClassName"]  # the typed extras stay
    assert validate_objects(objects) == []


def _diff(before: Any, after: Any, at: str = "") -> list[tuple[str, Any, Any]]:
    """Where two documents differ: (JSON Pointer, before, after), leaves only ('<absent>' for a missing member)."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [
            d
            for k in sorted(set(before) | set(after))
            for d in _diff(before.get(k, "<absent>"), after.get(k, "<absent>"), f"{at}/{k}")
        ]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (b, a) in enumerate(zip(before, after)) for d in _diff(b, a, f"{at}/{i}")]
    return [] if before == after else [(at, before, after)]


def test_one_patch_changes_every_backend_the_same_way() -> None:
    """What a patch changes is the same in every backend: the difference it makes to the pod template."""

    def changed(backend: str) -> list[tuple[str, Any, Any]]:
        before = pod_template(manifests(cluster(backend, **EXTRAS)), backend)
        return _diff(before, pod_template(manifests(cluster(backend, **EXTRAS, pod_patches=PATCHES)), backend))

    changes = {backend: changed(backend) for backend in BACKENDS}
    assert changes["jobset"] == [
        ("/metadata/labels/team", "<absent>", "ml"),
        ("/spec/containers/0/imagePullPolicy", "<absent>", "Always"),
        ("/spec/initContainers/0/image", "fluent/fluent-bit:3.1", "fluent/fluent-bit:3.2"),
        ("/spec/terminationGracePeriodSeconds", "<absent>", 120),
    ]
    assert all(c == changes["jobset"] for c in changes.values()), changes


def test_patches_change_only_the_pod_template_and_never_share_values_with_the_spec() -> None:
    value = {"example.com/owner": "ml-team"}
    c = cluster("jobset", pod_patches=[{"op": "add", "path": "/metadata/annotations", "value": value}])
    first = manifests(c)
    js = {m["kind"]: m for m in first}["JobSet"]
    assert "annotations" not in js["metadata"]  # the workload's own metadata is not the pod's
    pod_template(first, "jobset")["metadata"]["annotations"]["example.com/owner"] = "changed"
    assert value == {"example.com/owner": "ml-team"}
    assert pod_template(manifests(c), "jobset")["metadata"]["annotations"] == {"example.com/owner": "ml-team"}
    assert dump(manifests(c)) == dump(manifests(c))  # deterministic


@pytest.mark.parametrize("backend", BACKENDS)
def test_admission_refuses_a_patch_that_breaks_the_pod(backend: str) -> None:
    objects = manifests(cluster(backend, pod_patches=[{"op": "remove", "path": "/spec/containers"}]))
    assert "containers" not in pod_template(objects, backend)["spec"]
    found = validate_objects(objects)
    assert any(p.path.endswith("template.spec.containers") and "required" in p.message.lower() for p in found), found
    assert validate_objects(manifests(cluster(backend))) == []  # the patch broke it, not the job


def test_a_pool_selector_key_is_a_spec_problem() -> None:
    assert spec_problems(node_selector={"cloud.google.com/gke-tpu-topology": "2x4", "team": "ml"}) == [
        "jobs[0].node_selector.cloud.google.com/gke-tpu-topology = '2x4': cloud.google.com/gke-tpu-topology is "
        "jaxinfra's to set: the value comes from the node pool; fix: remove it; change the pool's TPU topology instead"
    ]
    assert spec_problems(node_selector={"cloud.google.com/gke-spot": "true"}) == [
        "jobs[0].node_selector.cloud.google.com/gke-spot = 'true': cloud.google.com/gke-spot is jaxinfra's to set: "
        "the value comes from the node pool; fix: remove it; change NodePool(spot=True) instead"
    ]


def test_a_patch_path_the_template_lacks_names_the_job_patch_and_op() -> None:
    assert render_problems(pod_patches=[PATCHES[1], {"op": "remove", "path": "/spec/affinity"}]) == [
        "job default/train: pod_patches[1] = {'op': 'remove', 'path': '/spec/affinity'}: remove '/spec/affinity' on "
        "backend jobset's pod template: /spec has no 'affinity' (it has 'restartPolicy', 'serviceAccountName', "
        "'automountServiceAccountToken', 'securityContext', 'containers', 'terminationGracePeriodSeconds'); "
        "fix: paths start at the pod template (/metadata/..., /spec/...), the same object in every backend; check the "
        "path against the pod template `jaxinfra synth` writes"
    ]
    [add] = render_problems(
        backend="job", pod_patches=[{"op": "add", "path": "/spec/affinity/nodeAffinity", "value": {}}]
    )
    assert add.startswith("job default/train: pod_patches[0] = ")
    assert "on backend job's pod template: /spec has no 'affinity'" in add
    assert "fix: 'add' needs the parent to exist: add the whole map or list one level up first;" in add


def test_a_failed_test_op_says_what_the_template_holds() -> None:
    test = {"op": "test", "path": "/spec/restartPolicy", "value": "Always"}
    assert render_problems(backend="jaxjob", pod_patches=[test]) == [
        "job default/train: pod_patches[0] = {'op': 'test', 'path': '/spec/restartPolicy', 'value': 'Always'}: test "
        "'/spec/restartPolicy' on backend jaxjob's pod template: it holds 'Never', not 'Always'; fix: the pod template "
        "holds another value there (see `jaxinfra synth`): update the test's value, or drop the test"
    ]


def test_a_malformed_patch_is_refused_with_the_spec() -> None:
    assert spec_problems(
        pod_patches=[{"op": "add", "path": "/spec/x", "value": 1}, {"op": "add", "path": "spec/x", "value": 1}]
    ) == [
        "jobs[0].pod_patches[1] = {'op': 'add', 'path': 'spec/x', 'value': 1}: path 'spec/x' is not a JSON Pointer; "
        "fix: write a JSON Pointer into the pod template, starting with '/' (e.g. '/spec/containers/0/image'; '~1' "
        "stands for '/' in a key, '~0' for '~')"
    ]
    [unknown] = spec_problems(pod_patches=[{"op": "merge", "path": "/spec"}])
    assert unknown.startswith(
        "jobs[0].pod_patches[0] = {'op': 'merge', 'path': '/spec'}: unknown op 'merge'; fix: use "
        "one of add, remove, replace, move, copy, test"
    )
    assert spec_problems(pod_patches=[{"op": "add", "path": "/spec/x", "vaule": 1, "value": 1}]) == [
        "jobs[0].pod_patches[0] = {'op': 'add', 'path': '/spec/x', 'vaule': 1, 'value': 1}: add takes no 'vaule'; "
        "fix: remove it: add takes op, path and value"
    ]


@pytest.mark.parametrize(("backend", "name"), [("jobset", "jax"), ("trainjob", "node"), ("job", "node")])
def test_a_sidecar_named_like_the_training_container_is_a_spec_problem(backend: str, name: str) -> None:
    assert spec_problems(backend=backend, sidecars=[Sidecar(name, "busybox")]) == [
        f"jobs[0].sidecars[0].name = {name!r}: {name!r} is the name of jaxinfra's training container ('jax', or 'node' "
        f"for trainjob); fix: give the sidecar another name"
    ]


def test_sidecar_names_are_unique_and_env_is_literal_and_credential_free() -> None:
    [dup] = spec_problems(sidecars=[Sidecar("proxy", "a"), Sidecar("proxy", "b")])
    assert dup.startswith("jobs[0].sidecars = ") and dup.endswith(
        ": two sidecars are named 'proxy'; fix: give each sidecar its own name"
    )
    [ref] = spec_problems(sidecars=[Sidecar("proxy", "a", env={"TOKEN": {"kind": "secret", "name": "s", "key": "k"}})])
    assert ref.startswith("jobs[0].sidecars[0].env.TOKEN = ") and "a sidecar's env takes literal strings only" in ref
    [secret] = spec_problems(sidecars=[Sidecar("proxy", "a", env={"API_KEY": "sk-0123456789abcdef0123"})])
    assert secret.startswith("jobs[0].sidecars[0].env.API_KEY = ") and "secrets never go inline" in secret


def test_a_bad_priority_class_name_is_a_spec_problem() -> None:
    assert spec_problems(priority_class="Research_High") == [
        "jobs[0].priority_class = 'Research_High': not a valid PriorityClass name; fix: use a DNS-1123 subdomain: "
        "lower-case letters, digits, '-' and '.'"
    ]


def test_tolerations_follow_the_api_servers_rules() -> None:
    assert spec_problems(tolerations=[Toleration("a"), Toleration("b", operator="Exists", value="x")]) == [
        "jobs[0].tolerations[1].value = 'x': operator Exists tolerates any value, so value must be empty; fix: remove "
        "value, or use operator='Equal'"
    ]
    assert spec_problems(tolerations=[Toleration("a", toleration_seconds=5)]) == [
        "jobs[0].tolerations[0].toleration_seconds = 5: toleration_seconds applies to effect NoExecute only; fix: set "
        "effect='NoExecute', or remove it"
    ]
    [keyless] = spec_problems(tolerations=[Toleration()])
    assert keyless.startswith("jobs[0].tolerations[0].operator = ")
    assert "without a key must use operator Exists" in keyless


def test_every_problem_of_the_extras_is_reported_at_once() -> None:
    found = spec_problems(
        priority_class="X",
        node_selector={"cloud.google.com/gke-accelerator": "a"},
        sidecars=[Sidecar("jax", "a")],
        pod_patches=[{"op": "nope", "path": "/x"}],
    )
    assert [p.split(" = ")[0] for p in found] == [
        "jobs[0].priority_class",
        "jobs[0].node_selector.cloud.google.com/gke-accelerator",
        "jobs[0].sidecars[0].name",
        "jobs[0].pod_patches[0]",
    ]


def test_customizing_a_pod_jaxinfra_does_not_render_is_a_spec_problem() -> None:
    found = spec_problems(
        backend="trainjob", runtime="jax-distributed", priority_class="high", pod_patches=[PATCHES[1]]
    )
    assert found == [
        "jobs[0].priority_class = 'high': ClusterTrainingRuntime 'jax-distributed' is not jaxinfra's: jaxinfra "
        "renders no pod template to apply priority_class, pod_patches to; fix: remove runtime (jaxinfra's "
        "TrainingRuntime takes them), or remove priority_class, pod_patches"
    ]


def test_explain_lists_the_customizations_only_when_there_are_any() -> None:
    jp = plan(
        cluster(
            "jobset",
            **EXTRAS,
            pod_patches=[
                *PATCHES,
                {"op": "move", "from": "/spec/nodeSelector/disk", "path": "/spec/nodeSelector/storage"},
            ],
        )
    ).jobs[0]
    assert dict(facts(jp))["customized"] == (
        "priority class research-high; 2 tolerations (dedicated, node.kubernetes.io/unreachable); node selector "
        "team=ml, disk=ssd; sidecar log-shipper; 6 pod patches (test /spec/priorityClassName, add "
        "/spec/terminationGracePeriodSeconds, add /spec/containers/0/imagePullPolicy, add /metadata/labels/team, "
        "replace /spec/initContainers/0/image, move /spec/nodeSelector/disk -> /spec/nodeSelector/storage)"
    )
    assert dict(facts(jp))["pod security"].endswith("(as jaxinfra renders the pods, before the job's pod patches)")
    assert "customized" not in dict(facts(plan(cluster("jobset")).jobs[0]))
    out = io.StringIO()
    render_explanation(
        Console(file=out, width=400),
        Path("stack.py"),
        plan(cluster("job", tolerations=[Toleration(operator="Exists")])),
    )
    assert [line.split()[1:] for line in out.getvalue().splitlines() if line.startswith("customized")] == [
        ["1", "toleration", "(any", "key)"]
    ]


def test_kueue_quota_counts_the_sidecars_requests() -> None:
    """Native sidecars run beside the main container for the pod's life: Kueue (and the scheduler) count their requests
    on top of the container's (kubernetes pkg/api/v1/resource/helpers.go PodRequests), so the ClusterQueue jaxinfra
    sizes for the largest job must too, or that job would never be admitted."""

    def quota(sidecars: list[Sidecar]) -> dict[str, object]:
        c = Cluster(
            name="q",
            kueue=True,
            node_pools=[NodePool("cpu", CPU(devices=2))],
            jobs=[
                JaxJob(
                    "t",
                    image="i",
                    node_pool="cpu",
                    nodes=2,
                    resources={"requests": {"cpu": "2", "memory": "4Gi"}},
                    sidecars=sidecars,
                )
            ],
        )
        [queue] = [m for m in manifests(c) if m["kind"] == "ClusterQueue"]
        return {r["name"]: r["nominalQuota"] for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}

    assert quota([]) == {"cpu": 4, "memory": "8Gi"}
    shipper = Sidecar(name="log", image="busybox", resources={"requests": {"cpu": "500m", "memory": "512Mi"}})
    assert quota([shipper]) == {"cpu": 5, "memory": 2 * (4 + 1 / 2) * 2**30}


#: The workload kind each backend renders last (its object_patches key).
WORKLOAD = {"jobset": "JobSet", "job": "Job", "jaxjob": "JAXJob", "trainjob": "TrainJob"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_object_patches_change_only_the_kinds_they_name_after_everything_else(backend: str) -> None:
    label = {"op": "add", "path": "/metadata/labels/cost-center", "value": "ml-42"}
    annotate = {"op": "add", "path": "/metadata/annotations", "value": {"iam.gke.io/gcp-service-account": "t@p.iam"}}
    plain = manifests(cluster(backend, pod_patches=[PATCHES[1]]))
    patched = manifests(
        cluster(
            backend, pod_patches=[PATCHES[1]], object_patches={WORKLOAD[backend]: [label], "ServiceAccount": [annotate]}
        )
    )
    assert [(m["kind"], m["metadata"]["name"]) for m in patched] == [(m["kind"], m["metadata"]["name"]) for m in plain]
    for before, after in zip(plain, patched):
        if after["kind"] == WORKLOAD[backend]:
            assert after["metadata"]["labels"] == {**before["metadata"]["labels"], "cost-center": "ml-42"}
            assert {**after, "metadata": before["metadata"]} == before  # the pod patch is still in, nothing else moved
        elif after["kind"] == "ServiceAccount":
            assert after["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": "t@p.iam"}
        else:
            assert after == before


def test_the_api_servers_checks_see_the_patched_objects() -> None:
    ttl = {"op": "add", "path": "/spec/ttlSecondsAfterFinished", "value": 3600}
    ok = manifests(cluster(object_patches={"JobSet": [ttl]}))
    assert [m["spec"]["ttlSecondsAfterFinished"] for m in ok if m["kind"] == "JobSet"] == [3600]
    assert validate_objects(ok) == []
    typo = manifests(cluster(object_patches={"JobSet": [{**ttl, "path": "/spec/ttlSecondsAfterFinish"}]}))
    [problem] = validate_objects(typo)
    assert "ttlSecondsAfterFinish" in str(problem)


def test_a_kind_the_job_does_not_render_names_those_it_does() -> None:
    label = {"op": "add", "path": "/metadata/labels/x", "value": "y"}
    assert render_problems(backend="jaxjob", object_patches={"Service": [label], "Role": [label]}) == [
        f"job default/train: object_patches[{kind!r}] = {kind!r}: the job renders no {kind} (backend jaxjob renders "
        "JAXJob, NetworkPolicy, ServiceAccount); fix: patch one of the kinds it renders (see `jaxinfra synth`), or "
        "remove the entry"
        for kind in ("Service", "Role")
    ]
    [bad] = spec_problems(object_patches={"service": [label]})
    assert "'service' is not a kind" in bad and "JobSet, Service" in bad


def test_an_object_patch_that_does_not_apply_names_the_kind_object_and_op() -> None:
    [remove] = render_problems(object_patches={"Service": [{"op": "remove", "path": "/spec/sessionAffinity"}]})
    assert remove.startswith(
        "job default/train: object_patches['Service'][0] = {'op': 'remove', 'path': '/spec/sessionAffinity'}: remove "
        "'/spec/sessionAffinity' on its Service train: /spec has no 'sessionAffinity' (it has "
    )
    assert remove.endswith(
        "fix: paths start at the Service object; check the path against the Service object `jaxinfra synth` writes"
    )


def test_explain_counts_the_object_patches() -> None:
    label = {"op": "add", "path": "/metadata/labels/x", "value": "y"}
    jp = plan(cluster(object_patches={"JobSet": [label, label], "Service": [label]})).jobs[0]
    assert dict(facts(jp))["customized"] == "2 JobSet patches; 1 Service patch"
