"""Security defaults (issue 7): Pod Security `restricted`, RBAC least privilege, NetworkPolicy, no inline secrets.

`restricted_violations` implements the `restricted` profile of the Kubernetes Pod Security
Standards (kubernetes.io/docs/concepts/security/pod-security-standards, which is cumulative:
baseline's controls plus restricted's) over a pod spec, for Linux pods. Every rendered pod
template of every stack x compatible backend must pass it, except the documented TPU
exceptions (host_network, privileged), which `jaxinfra explain` must name and explain.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from jaxinfra import CPU, GPU, TPU, Cluster, ConfigMapRef, JaxJob, NodePool, SecretRef, SpecError, manifests
from jaxinfra.explain import facts
from jaxinfra.plan import plan
from jaxinfra.validate import validate_objects
from tests.support.stacks import PAIR_IDS, PAIRS, load_stack, rendered

pytestmark = pytest.mark.unit

# --- the restricted profile, from the Kubernetes docs ---------------------------------------------

#: Restricted "Volume Types": only these (besides persistentVolumeClaim) may be used.
ALLOWED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
#: Baseline "Sysctls": the safe set.
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
#: Baseline "SELinux": the allowed types.
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    """Every control of Pod Security `restricted` (and so baseline) that a pod spec violates."""
    out: list[str] = []
    pod_sc = spec.get("securityContext") or {}
    containers = [*spec.get("containers", []), *spec.get("initContainers", []), *spec.get("ephemeralContainers", [])]
    # baseline: host namespaces
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            out.append(f"host namespaces: {field}")
    # baseline: HostProcess (Windows)
    if (pod_sc.get("windowsOptions") or {}).get("hostProcess"):
        out.append("HostProcess")
    # baseline: hostPath volumes; restricted: volume types
    for v in spec.get("volumes", []):
        kinds = set(v) - {"name"}
        if "hostPath" in kinds:
            out.append(f"hostPath volume {v['name']}")
        if not kinds <= ALLOWED_VOLUMES:
            out.append(f"volume type {sorted(kinds - ALLOWED_VOLUMES)} of {v['name']}")
    # baseline: sysctls
    for s in pod_sc.get("sysctls", []):
        if s.get("name") not in SAFE_SYSCTLS:
            out.append(f"sysctl {s.get('name')}")

    # baseline: AppArmor, SELinux, seccomp (pod level); restricted: seccomp must be set, runAsNonRoot, runAsUser
    def level_checks(sc: dict[str, Any], where: str) -> None:
        if (sc.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
            out.append(f"{where}: AppArmor {sc['appArmorProfile']['type']}")
        se = sc.get("seLinuxOptions") or {}
        if se.get("type", "") not in SELINUX_TYPES or se.get("user") or se.get("role"):
            out.append(f"{where}: SELinux options {se}")
        if sc.get("runAsUser") == 0:
            out.append(f"{where}: runAsUser 0")
        if sc.get("runAsNonRoot") is False:
            out.append(f"{where}: runAsNonRoot false")
        if (sc.get("seccompProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
            out.append(f"{where}: seccomp {sc['seccompProfile']['type']}")

    level_checks(pod_sc, "pod")
    for i, c in enumerate(containers):
        where = f"container {c.get('name', i)}"
        sc = c.get("securityContext") or {}
        level_checks(sc, where)
        # baseline: privileged containers, capabilities, host ports, /proc mount type
        if sc.get("privileged"):
            out.append(f"{where}: privileged")
        caps = sc.get("capabilities") or {}
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"{where}: capabilities added {caps['add']}")
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{where}: capabilities do not drop ALL")
        if sc.get("procMount") not in (None, "Default"):
            out.append(f"{where}: procMount {sc['procMount']}")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            out.append(f"{where}: hostPort")
        # restricted: privilege escalation must be disallowed explicitly
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{where}: allowPrivilegeEscalation not false")
        # restricted: non-root, either at the pod level or on every container
        if not (sc.get("runAsNonRoot") is True or (pod_sc.get("runAsNonRoot") is True and "runAsNonRoot" not in sc)):
            out.append(f"{where}: runAsNonRoot not true")
        # restricted: a seccomp profile must be set, at the pod level or on every container
        if "seccompProfile" not in sc and "seccompProfile" not in pod_sc:
            out.append(f"{where}: no seccompProfile")
    return out


def pod_specs(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every pod template of every object kind jaxinfra renders, by where it is."""
    for o in objects:
        kind, spec = o["kind"], o.get("spec", {})
        if kind == "Job":
            yield "Job", spec["template"]["spec"]
        elif kind == "JobSet":
            for rj in spec["replicatedJobs"]:
                yield f"JobSet/{rj['name']}", rj["template"]["spec"]["template"]["spec"]
        elif kind == "JAXJob":
            for name, replica in spec["jaxReplicaSpecs"].items():
                yield f"JAXJob/{name}", replica["template"]["spec"]
        elif kind == "TrainingRuntime":
            for rj in spec["template"]["spec"]["replicatedJobs"]:
                yield f"TrainingRuntime/{rj['name']}", rj["template"]["spec"]["template"]["spec"]


def cluster_of(
    accelerator: Any, backend: str = "jobset", namespace: str = "default", pod_security: Any = "restricted", **job: Any
) -> Cluster:
    return Cluster(
        name="c",
        node_pools=[NodePool("pool", accelerator)],
        pod_security=pod_security,
        jobs=[JaxJob("train", namespace=namespace, image="img", node_pool="pool", backend=backend, **job)],
    )


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def explained(cluster: Cluster) -> dict[str, str]:
    return dict(facts(plan(cluster).jobs[0]))


# --- Pod Security ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "backend"), PAIRS, ids=PAIR_IDS)
def test_every_stack_meets_restricted(path: Path, backend: str) -> None:
    objects = rendered(path, backend)
    specs = list(pod_specs(objects))
    cluster = load_stack(path, backend)
    jobs = plan(cluster).jobs
    assert specs or any(not jp.renders_pod for jp in jobs)
    # A GPUDirect pool's declared exceptions (JobPlan.pod_security_exceptions): its host volumes, its daemon as root.
    stacks = [jp.gpudirect for jp in jobs if jp.gpudirect]
    declared = {f"hostPath volume {v.name}" for s in stacks for v in s.volumes}
    daemons = tuple(f"container {s.daemon.name}:" for s in stacks if s.daemon)
    for where, spec in specs:
        left = [
            v
            for v in restricted_violations(spec)
            if v not in declared and not v.startswith((*daemons, "volume type ['hostPath']"))
        ]
        assert left == [], where
        assert bool(restricted_violations(spec)) == bool(stacks), where
    for jp in jobs:
        expected = "exceptions to restricted: hostPath (GPUDirect" if jp.gpudirect else "restricted"
        assert dict(facts(jp))["pod security"].startswith(expected)
    for ns in by_kind(objects, "Namespace"):
        assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_checker_catches_what_restricted_forbids() -> None:
    ok = next(spec for _, spec in pod_specs(manifests(cluster_of(GPU("h100-80gb", 8)))))
    assert restricted_violations(ok) == []  # the GPU /dev/shm emptyDir is an allowed volume type
    bad = {
        **ok,
        "hostPID": True,
        "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
        "securityContext": {**ok["securityContext"], "runAsUser": 0, "seccompProfile": {"type": "Unconfined"}},
        "containers": [
            {
                **ok["containers"][0],
                "ports": [{"containerPort": 1, "hostPort": 1}],
                "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}, "procMount": "Unmasked"},
            }
        ],
    }
    found = " | ".join(restricted_violations(bad))
    for what in (
        "hostPID",
        "hostPath",
        "volume type",
        "runAsUser 0",
        "seccomp Unconfined",
        "hostPort",
        "SYS_ADMIN",
        "drop ALL",
        "procMount",
        "allowPrivilegeEscalation",
    ):
        assert what in found


def test_restricted_by_default_with_the_users_ids() -> None:
    objs = manifests(cluster_of(CPU(), run_as_user=2000, run_as_group=3000, fs_group=4000))
    [(_, spec)] = pod_specs(objs)
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 2000,
        "runAsGroup": 3000,
        "fsGroup": 4000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert spec["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert "hostNetwork" not in spec and "dnsPolicy" not in spec
    with pytest.raises(SpecError) as err:
        cluster_of(CPU(), run_as_user=0)
    assert [p.path for p in err.value.problems] == ["jobs[0].run_as_user"]


@pytest.mark.parametrize("backend", ["jobset", "trainjob"])
def test_tpu_exceptions_are_opt_in_rendered_and_explained(backend: str) -> None:
    cluster = cluster_of(TPU("v5p", "2x2x4"), backend, host_network=True, privileged=True)
    [(_, spec)] = pod_specs(manifests(cluster))
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["containers"][0]["securityContext"] == {"privileged": True}
    assert sorted(restricted_violations(spec)) == sorted(
        [
            "host namespaces: hostNetwork",
            "container node: privileged" if backend == "trainjob" else "container jax: privileged",
            *[
                f"container {spec['containers'][0]['name']}: {w}"
                for w in ("capabilities do not drop ALL", "allowPrivilegeEscalation not false")
            ],
        ]
    )
    line = explained(cluster)["pod security"]
    assert (
        line.startswith("exceptions to restricted")
        and "hostNetwork (host_network=True" in line
        and "privileged (privileged=True" in line
    )
    assert "not enforced on host-network pods" in explained(cluster)["network policy"]


def test_multislice_tpu_stays_restricted_unless_asked() -> None:
    cluster = cluster_of(TPU("v5p", "2x2x4"), slices=2)
    assert all(restricted_violations(s) == [] for _, s in pod_specs(manifests(cluster)))


def test_an_exception_in_an_enforced_namespace_is_a_spec_problem_with_the_fix() -> None:
    with pytest.raises(SpecError) as err:
        cluster_of(TPU("v5p", "2x2x4"), namespace="ml", host_network=True, privileged=True)
    problems = {p.path: p for p in err.value.problems}
    assert set(problems) == {"jobs[0].host_network", "jobs[0].privileged"}
    assert "enforce=restricted" in problems["jobs[0].host_network"].message
    assert "pod_security='privileged'" in problems["jobs[0].host_network"].fix
    # the fix works; and a namespace jaxinfra does not create (default) carries no label to conflict with
    objs = manifests(cluster_of(TPU("v5p", "2x2x4"), namespace="ml", pod_security="privileged", host_network=True))
    assert by_kind(objs, "Namespace")[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert by_kind(manifests(cluster_of(CPU(), namespace="ml", pod_security=None)), "Namespace")[0]["metadata"][
        "labels"
    ] == {"app.kubernetes.io/managed-by": "jaxinfra"}
    cluster_of(TPU("v5p", "2x2x4"), host_network=True)  # namespace default: no problem


def test_a_foreign_runtime_is_explained_and_refused_in_a_restricted_namespace() -> None:
    cluster = cluster_of(CPU(), "trainjob", runtime="jax-distributed")
    assert list(pod_specs(manifests(cluster))) == []
    assert "ClusterTrainingRuntime jax-distributed" in explained(cluster)["pod security"]
    with pytest.raises(SpecError) as err:
        cluster_of(CPU(), "trainjob", namespace="ml", runtime="jax-distributed")
    assert [p.path for p in err.value.problems] == ["jobs[0].runtime"]
    cluster_of(CPU(), "trainjob", namespace="ml", runtime="jax-distributed", pod_security="baseline")


# --- RBAC -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["jobset", "job", "jaxjob", "trainjob"])
def test_kubernetes_api_gets_exactly_get_list_watch_and_a_token(backend: str) -> None:
    objs = manifests(cluster_of(CPU(), backend, namespace="ml", kubernetes_api=True))
    assert not [o for o in objs if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    [role], [binding] = by_kind(objs, "Role"), by_kind(objs, "RoleBinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "ml"
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods", "services"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
    ]
    flat = [x for rule in role["rules"] for k in ("apiGroups", "resources", "verbs") for x in rule[k]]
    assert "*" not in flat and not any("/" in r for rule in role["rules"] for r in rule["resources"])  # no subresources
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "train"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "train", "namespace": "ml"}]
    [sa] = by_kind(objs, "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False  # the token is the pod's choice, not every pod's of the SA
    for _, spec in pod_specs(objs):
        assert spec["automountServiceAccountToken"] is True and spec["serviceAccountName"] == "train"
        assert restricted_violations(spec) == []
    kinds = [o["kind"] for o in objs]
    assert kinds.index("Role") < kinds.index("RoleBinding") < len(kinds) - 1  # before the workload
    assert "Role train: get/list/watch" in explained(cluster_of(CPU(), backend, kubernetes_api=True))["Kubernetes API"]
    assert validate_objects(objs) == []


@pytest.mark.parametrize(("path", "backend"), PAIRS, ids=PAIR_IDS)
def test_no_role_and_no_token_by_default(path: Path, backend: str) -> None:
    objs = rendered(path, backend)
    assert not [o for o in objs if o["kind"] in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")]
    assert all(spec["automountServiceAccountToken"] is False for _, spec in pod_specs(objs))
    assert all(sa["automountServiceAccountToken"] is False for sa in by_kind(objs, "ServiceAccount"))


# --- NetworkPolicy --------------------------------------------------------------------------------


def pod_labels(o: dict[str, Any]) -> Iterator[dict[str, str]]:
    """The labels of every pod template of an object (what the operators copy onto the pods)."""
    kind, spec = o["kind"], o.get("spec", {})
    if kind == "Job":
        yield spec["template"]["metadata"]["labels"]
    elif kind == "JobSet":
        yield from (rj["template"]["spec"]["template"]["metadata"]["labels"] for rj in spec["replicatedJobs"])
    elif kind == "JAXJob":
        yield from (r["template"]["metadata"]["labels"] for r in spec["jaxReplicaSpecs"].values())
    elif kind == "TrainingRuntime":
        yield from (
            rj["template"]["spec"]["template"]["metadata"]["labels"]
            for rj in spec["template"]["spec"]["replicatedJobs"]
        )


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.mark.parametrize(("path", "backend"), PAIRS, ids=PAIR_IDS)
def test_network_policy_admits_only_the_jobs_own_pods(path: Path, backend: str) -> None:
    objs = rendered(path, backend)
    policies = by_kind(objs, "NetworkPolicy")
    assert len(policies) == len(plan(load_stack(path, backend)).jobs)
    for policy in policies:
        spec = policy["spec"]
        assert spec["policyTypes"] == ["Ingress"] and "egress" not in spec  # egress left to the user
        selector = spec["podSelector"]["matchLabels"]
        [rule] = spec["ingress"]
        assert rule == {
            "from": [{"podSelector": {"matchLabels": selector}}]
        }  # no namespaceSelector, no ipBlock; any port
        owned = [
            labels
            for o in objs
            if o["metadata"]["name"] == policy["metadata"]["name"]
            and o["metadata"].get("namespace") == policy["metadata"]["namespace"]
            for labels in pod_labels(o)
        ]
        assert owned and all(selects(selector, labels) for labels in owned)
        kinds = [o["kind"] for o in objs]
        assert objs.index(policy) < max(i for i, k in enumerate(kinds) if k in ("JobSet", "Job", "JAXJob", "TrainJob"))


def test_network_policy_separates_jobs_and_can_be_turned_off() -> None:
    cluster = Cluster(
        name="c",
        node_pools=[NodePool("pool", CPU())],
        jobs=[
            JaxJob("a", image="img", node_pool="pool"),
            JaxJob("b", image="img", node_pool="pool", network_policy=False),
        ],
    )
    objs = manifests(cluster)
    [policy] = by_kind(objs, "NetworkPolicy")
    selector = policy["spec"]["podSelector"]["matchLabels"]
    [b] = [o for o in objs if o["kind"] == "JobSet" and o["metadata"]["name"] == "b"]
    assert not any(selects(selector, labels) for labels in pod_labels(b))
    assert explained(
        Cluster(
            name="c",
            node_pools=[NodePool("pool", CPU())],
            jobs=[JaxJob("b", image="img", node_pool="pool", network_policy=False)],
        )
    )["network policy"].startswith("none")


def test_a_foreign_runtime_is_selected_by_the_jobset_label() -> None:
    objs = manifests(cluster_of(CPU(), "trainjob", runtime="jax-distributed"))
    [policy] = by_kind(objs, "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"] == {"jobset.sigs.k8s.io/jobset-name": "train"}


# --- secrets --------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["jobset", "job", "jaxjob", "trainjob"])
def test_secret_and_configmap_references_render_as_value_from(backend: str) -> None:
    cluster = cluster_of(
        CPU(),
        backend,
        env={
            "WANDB_API_KEY": SecretRef("wandb", "api-key"),
            "MODE": ConfigMapRef("settings", "mode", optional=True),
            "RANK": "$(JAX_PROCESS_ID)",
            "HF_TOKEN": "$(OTHER)",
        },
    )
    objs = manifests(cluster)
    text = repr(objs)
    assert {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}} in env_entries(
        objs
    )
    assert {
        "name": "MODE",
        "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode", "optional": True}},
    } in env_entries(objs)
    assert "api-key" in text and validate_objects(objs) == []
    refs = explained(cluster)["env references"]
    assert "WANDB_API_KEY from Secret wandb/api-key" in refs and "MODE from ConfigMap settings/mode (optional)" in refs


def env_entries(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for o in objs:
        if o["kind"] == "TrainJob":
            out += o["spec"]["trainer"].get("env", [])
        for _, spec in pod_specs([o]):
            out += [e for c in spec["containers"] for e in c.get("env", [])]
    return out


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DB_PASSWORD", "hunter2"),
        ("HF_TOKEN", "abc"),
        ("WANDB_API_KEY", "0123456789abcdef"),
        ("GOOGLE_APPLICATION_CREDENTIALS_JSON", "{}"),
        ("AWS_ID", "AKIAIOSFODNN7EXAMPLE"),
        ("KEY", "-----BEGIN RSA PRIVATE KEY-----\nMIIE..."),
        ("GH", "ghp_" + "a1B2c3D4e5" * 4),
        ("SLACK", "xoxb-123456789012-abcdefghij"),
        ("MAPS", "AIza" + "Sy" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
        ("HF", "hf_" + "AbCdEfGhIj" * 4),
        ("BLOB", "q8Zr2Lw9Xv4Tn7Ym1Kp6Hs3Jd5Fg0Bc8Nt"),
    ],
)
def test_credential_looking_literals_are_refused_with_the_fix(name: str, value: str) -> None:
    with pytest.raises(SpecError) as err:
        cluster_of(CPU(), env={name: value})
    [p] = err.value.problems
    assert p.path == f"jobs[0].env.{name}"
    assert "secrets never go inline" in p.message and "SecretRef('NAME', 'KEY')" in p.fix and name in p.fix


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TOKENIZERS_PARALLELISM", "false"),
        ("MAX_TOKENS", "2048"),
        ("XLA_FLAGS", "--xla_tpu_enable_async_collective_fusion=true"),
        ("GIT_SHA", "3f786850e387550fdab836ed7e6dc881de23001b3f786850"),
        ("DATA", "gs://bucket/some/long/path/to/data-00001"),
        ("API_TOKEN", ""),
        ("HF_TOKEN", "$(HF_TOKEN_FROM_SECRET)"),
        ("RANK", "$(JAX_PROCESS_ID)"),
    ],
)
def test_ordinary_literals_and_references_are_allowed(name: str, value: str) -> None:
    cluster_of(CPU(), env={name: value})


def test_every_new_object_is_strictly_schema_valid() -> None:
    for backend in ("jobset", "job", "jaxjob", "trainjob"):
        objs = manifests(
            cluster_of(
                TPU("v5e", "2x2") if backend != "trainjob" else CPU(),
                backend,
                namespace="ml",
                pod_security="privileged",
                kubernetes_api=True,
                host_network=True,
                privileged=True,
                env={"S": SecretRef("s", "k"), "C": ConfigMapRef("c", "k")},
            )
        )
        assert {"Namespace", "Role", "RoleBinding", "NetworkPolicy"} <= {o["kind"] for o in objs}
        assert validate_objects(objs, source=backend) == []


def test_explain_shows_security_in_the_cli_output(tmp_path: Path) -> None:
    from jaxinfra.explain import render_explanation

    console = Console(record=True, width=200)
    render_explanation(console, tmp_path / "s.py", plan(cluster_of(CPU(), kubernetes_api=True)))
    text = console.export_text()
    assert (
        "pod security" in text
        and "restricted: non-root" in text
        and "Kubernetes API" in text
        and "network policy" in text
    )
