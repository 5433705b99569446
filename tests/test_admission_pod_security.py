"""Pod Security admission (jaxinfra.admission.pod_security) against the verdicts and texts of a real API server's
PodSecurity plugin (kubernetes/pod-security-admission policy/ and admission/)."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from jaxinfra import gpudirect
from jaxinfra.admission import pod_security as ps
from jaxinfra.admission.store import Finding
from jaxinfra.plan import plan
from tests.support.stacks import PAIR_IDS, PAIRS, load_stack, rendered

pytestmark = pytest.mark.unit

RESTRICTED_NS = {"kubernetes.io/metadata.name": "ml", "pod-security.kubernetes.io/enforce": "restricted"}


def pod(**spec: Any) -> dict[str, Any]:
    """A worker pod as jaxinfra renders it: Pod Security `restricted` at pod and container level."""
    base: dict[str, Any] = {
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "runAsGroup": 1000,
            "fsGroup": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "jax",
                "image": "us-docker.pkg.dev/example/jax:0.4.30",
                "command": ["python", "-m", "train"],
                "ports": [{"containerPort": 8476, "name": "coordinator"}],
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }
        ],
    }
    base.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer-0", "namespace": "ml"}, "spec": base}


def spec_of(obj: Mapping) -> dict[str, Any]:
    return obj["spec"]


def jax(obj: Mapping) -> dict[str, Any]:
    return obj["spec"]["containers"][0]


def check(obj: Mapping, level: str = "restricted", version: str = "latest") -> list[str]:
    return ps.violations(level, version, obj.get("metadata", {}), obj["spec"])


# --- the restricted pod and each of its four settings ----------------------------------------------------------


def test_jaxinfra_style_pod_passes_every_level() -> None:
    p = pod()
    assert check(p, "restricted") == check(p, "baseline") == check(p, "privileged") == []
    assert ps.admit(p, RESTRICTED_NS) == []


def _no_run_as_non_root(p: dict) -> None:
    del spec_of(p)["securityContext"]["runAsNonRoot"]


def _no_drop_all(p: dict) -> None:
    del jax(p)["securityContext"]["capabilities"]


def _no_seccomp(p: dict) -> None:
    del spec_of(p)["securityContext"]["seccompProfile"]


def _escalation_allowed(p: dict) -> None:
    del jax(p)["securityContext"]["allowPrivilegeEscalation"]


@pytest.mark.parametrize(
    "remove, reason",
    [
        (
            _no_run_as_non_root,
            'runAsNonRoot != true (pod or container "jax" must set securityContext.runAsNonRoot=true)',
        ),
        (
            _no_drop_all,
            'unrestricted capabilities (container "jax" must set securityContext.capabilities.drop=["ALL"])',
        ),
        (
            _no_seccomp,
            'seccompProfile (pod or container "jax" must set securityContext.seccompProfile.type to '
            '"RuntimeDefault" or "Localhost")',
        ),
        (
            _escalation_allowed,
            'allowPrivilegeEscalation != false (container "jax" must set '
            "securityContext.allowPrivilegeEscalation=false)",
        ),
    ],
    ids=["runAsNonRoot", "drop-ALL", "seccomp", "allowPrivilegeEscalation"],
)
def test_each_restricted_setting_missing_fails_restricted_only(remove: Any, reason: str) -> None:
    p = pod()
    remove(p)
    assert check(p, "restricted") == [reason]
    assert check(p, "baseline") == []
    assert ps.admit(p, {**RESTRICTED_NS, ps.ENFORCE: "baseline"}) == []


def test_bare_pod_in_a_restricted_namespace_is_refused_as_the_docs_show() -> None:
    """The kubectl output of the Pod Security Admission tutorial: four reasons, joined with ", ", in check order."""
    bare = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "busybox"},
        "spec": {"containers": [{"name": "busybox", "image": "busybox", "command": ["sleep", "1000000"]}]},
    }
    [finding] = ps.admit(bare, RESTRICTED_NS)
    assert finding == Finding(
        ("spec",),
        "restricted:latest",
        (
            'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "busybox" must set '
            'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "busybox" must set '
            'securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "busybox" must set '
            'securityContext.runAsNonRoot=true), seccompProfile (pod or container "busybox" must set '
            'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
        ),
        finding.fix,
    )
    assert not finding.warning and "allowPrivilegeEscalation: false" in finding.fix


def test_explicit_bad_values_are_named_as_such() -> None:
    p = pod(securityContext={"runAsNonRoot": False, "runAsUser": 0, "seccompProfile": {"type": "Unconfined"}})
    assert check(p) == [
        "runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false)",
        "runAsUser=0 (pod must not set runAsUser=0)",
        'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")',
    ]
    assert check(p, "baseline") == [
        'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")'
    ]


def test_container_level_settings_cover_a_pod_without_them() -> None:
    p = pod(securityContext={})
    jax(p)["securityContext"].update(
        runAsNonRoot=True, seccompProfile={"type": "Localhost", "localhostProfile": "jax.json"}
    )
    assert check(p) == []
    jax(p)["securityContext"]["runAsNonRoot"] = False
    assert check(p) == ['runAsNonRoot != true (container "jax" must not set securityContext.runAsNonRoot=false)']


# --- baseline ---------------------------------------------------------------------------------------------------


def test_privileged_container_fails_baseline() -> None:
    p = pod()
    jax(p)["securityContext"] = {"privileged": True}  # jaxinfra's `privileged` exception
    assert check(p, "baseline") == ['privileged (container "jax" must not set securityContext.privileged=true)']
    assert check(p, "restricted") == [
        'privileged (container "jax" must not set securityContext.privileged=true)',
        'allowPrivilegeEscalation != false (container "jax" must set securityContext.allowPrivilegeEscalation=false)',
        'unrestricted capabilities (container "jax" must set securityContext.capabilities.drop=["ALL"])',
    ]


def test_host_namespaces_fail_baseline() -> None:
    assert check(pod(hostNetwork=True), "baseline") == ["host namespaces (hostNetwork=true)"]
    assert check(pod(hostNetwork=True, hostIPC=True, hostPID=True), "baseline") == [
        "host namespaces (hostNetwork=true, hostPID=true, hostIPC=true)"
    ]
    assert check(pod(hostNetwork=False), "baseline") == []


def test_host_ports_are_listed_as_sorted_strings() -> None:
    p = pod()
    jax(p)["ports"] = [{"containerPort": 8476, "hostPort": 8476}, {"containerPort": 10000, "hostPort": 10000}]
    assert check(p, "baseline") == ['hostPort (container "jax" uses hostPorts 10000, 8476)']
    jax(p)["ports"] = [{"containerPort": 8476, "hostPort": 0}]
    assert check(p, "baseline") == []


def test_host_path_volume_is_a_restricted_volume_type_at_restricted() -> None:
    p = pod(
        volumes=[
            {"name": "dev-shm", "emptyDir": {"medium": "Memory"}},
            {"name": "host-logs", "hostPath": {"path": "/var/log"}},
        ]
    )
    assert check(p, "baseline") == ['hostPath volumes (volume "host-logs")']
    assert check(p, "restricted") == [
        'restricted volume types (volume "host-logs" uses restricted volume type "hostPath")'
    ]
    p = pod(
        volumes=[
            {"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}},
            {"name": "data", "nfs": {"server": "nfs.example", "path": "/data"}},
            {"name": "odd", "someFutureSource": {}},
        ]
    )
    assert check(p, "baseline") == []
    assert check(p, "restricted") == [
        'restricted volume types (volumes "data", "odd" use restricted volume types "nfs", "unknown")'
    ]


def test_added_capabilities() -> None:
    p = pod()
    jax(p)["securityContext"]["capabilities"]["add"] = ["SYS_ADMIN", "NET_BIND_SERVICE", "IPC_LOCK"]
    assert check(p, "baseline") == [
        'non-default capabilities (container "jax" must not include "IPC_LOCK", '
        '"SYS_ADMIN" in securityContext.capabilities.add)'
    ]
    assert check(p, "restricted") == [
        'unrestricted capabilities (container "jax" must not include "IPC_LOCK", '
        '"SYS_ADMIN" in securityContext.capabilities.add)'
    ]
    jax(p)["securityContext"]["capabilities"] = {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
    assert check(p, "restricted") == []


def test_other_baseline_checks() -> None:
    p = pod()
    p["spec"]["securityContext"]["sysctls"] = [
        {"name": "kernel.msgmax", "value": "65536"},
        {"name": "net.ipv4.ip_local_port_range", "value": "1024 65000"},
    ]
    jax(p)["securityContext"].update(
        procMount="Unmasked",
        seLinuxOptions={"type": "spc_t", "user": "system_u"},
        appArmorProfile={"type": "Unconfined"},
        windowsOptions={"hostProcess": True},
    )
    jax(p)["readinessProbe"] = {"httpGet": {"path": "/healthz", "port": 8080, "host": "10.0.0.1"}}
    assert check(p, "baseline") == [
        'forbidden AppArmor profile (container "jax" must not set AppArmor profile type to "Unconfined")',
        'probe or lifecycle host (container "jax" uses probe or lifecycle host "10.0.0.1")',
        'procMount (container "jax" must not set securityContext.procMount to "Unmasked")',
        'seLinuxOptions (container "jax" set forbidden securityContext.seLinuxOptions: type "spc_t"; '
        "user may not be set)",
        "forbidden sysctls (kernel.msgmax)",
        'hostProcess (container "jax" must not set securityContext.windowsOptions.hostProcess=true)',
    ]


def test_apparmor_annotation_is_go_quoted() -> None:
    p = pod()
    p["metadata"]["annotations"] = {
        "container.apparmor.security.beta.kubernetes.io/jax": "unconfined",
        "container.apparmor.security.beta.kubernetes.io/sidecar": "localhost/jax",
    }
    assert check(p, "baseline") == [
        "forbidden AppArmor profile (annotation must not set AppArmor profile type to "
        '"container.apparmor.security.beta.kubernetes.io/jax="unconfined"")'
    ]


# --- every container is checked -----------------------------------------------------------------------------------


def test_init_container_is_checked_first() -> None:
    p = pod()
    spec_of(p)["initContainers"] = [{"name": "fetch-data", "image": "busybox"}]
    assert check(p) == [
        'allowPrivilegeEscalation != false (container "fetch-data" must set '
        "securityContext.allowPrivilegeEscalation=false)",
        'unrestricted capabilities (container "fetch-data" must set securityContext.capabilities.drop=["ALL"])',
    ]
    jax(p)["securityContext"] = {}
    assert check(p)[0] == (
        'allowPrivilegeEscalation != false (containers "fetch-data", "jax" must set '
        "securityContext.allowPrivilegeEscalation=false)"
    )
    spec_of(p)["initContainers"][0]["securityContext"] = {"privileged": True}
    assert check(p, "baseline") == ['privileged (container "fetch-data" must not set securityContext.privileged=true)']


def test_ephemeral_container_is_checked() -> None:
    p = pod(ephemeralContainers=[{"name": "debugger", "image": "busybox", "securityContext": {"privileged": True}}])
    assert check(p, "baseline") == ['privileged (container "debugger" must not set securityContext.privileged=true)']


# --- versions --------------------------------------------------------------------------------------------------------


def test_checks_apply_from_their_version() -> None:
    p = pod()
    p["spec"]["securityContext"]["runAsUser"] = 0
    assert check(p, "restricted", "v1.22") == []
    assert check(p, "restricted", "v1.23") == ["runAsUser=0 (pod must not set runAsUser=0)"]
    bare = pod(securityContext={})
    jax(bare)["securityContext"] = {"capabilities": {"add": ["NET_RAW"]}}
    # before 1.22 restricted has no drop-ALL rule, only baseline's default set; before 1.19 no seccomp field rule
    assert check(bare, "restricted", "v1.18") == [
        'non-default capabilities (container "jax" must not include "NET_RAW" in securityContext.capabilities.add)',
        'allowPrivilegeEscalation != false (container "jax" must set securityContext.allowPrivilegeEscalation=false)',
        'runAsNonRoot != true (pod or container "jax" must set securityContext.runAsNonRoot=true)',
    ]
    assert check(bare, "restricted", "v1.7")[1:] == [
        'runAsNonRoot != true (pod or container "jax" must set securityContext.runAsNonRoot=true)'
    ]


def test_sysctls_grow_by_version_and_later_versions_read_as_the_newest() -> None:
    p = pod()
    p["spec"]["securityContext"]["sysctls"] = [{"name": "net.ipv4.tcp_keepalive_time", "value": "600"}]
    assert check(p, "baseline", "v1.28") == ["forbidden sysctls (net.ipv4.tcp_keepalive_time)"]
    assert check(p, "baseline", "v1.29") == []
    p["spec"]["securityContext"]["sysctls"] = [{"name": "net.ipv4.tcp_slow_start_after_idle", "value": "0"}]
    assert check(p, "baseline", "v1.36") == ["forbidden sysctls (net.ipv4.tcp_slow_start_after_idle)"]
    assert check(p, "baseline", "v1.37") == check(p, "baseline", "v1.99") == check(p, "baseline", "latest") == []
    assert ps.NEWEST == (1, 37)


def test_windows_pods_skip_linux_only_checks_from_1_25() -> None:
    win = {
        "os": {"name": "windows"},
        "securityContext": {"runAsNonRoot": True},
        "containers": [{"name": "iis", "image": "mcr.microsoft.com/windows/servercore/iis"}],
    }
    assert ps.violations("restricted", "latest", {}, win) == []
    assert [r.split(" (")[0] for r in ps.violations("restricted", "v1.24", {}, win)] == [
        "allowPrivilegeEscalation != false",
        "unrestricted capabilities",
        "seccompProfile",
    ]


def test_user_namespace_relaxes_root_checks_from_1_35() -> None:
    p = pod(hostUsers=False, securityContext={"runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}})
    jax(p)["securityContext"]["procMount"] = "Unmasked"
    assert check(p, "baseline") == []
    assert check(p, "restricted") == [
        'procMount (container "jax" must not set securityContext.procMount to "Unmasked")'
    ]
    assert check(p, "restricted", "v1.34") == [
        'procMount (container "jax" must not set securityContext.procMount to "Unmasked")',
        'runAsNonRoot != true (pod or container "jax" must set securityContext.runAsNonRoot=true)',
        "runAsUser=0 (pod must not set runAsUser=0)",
    ]


def test_seccomp_annotations_before_1_19() -> None:
    p = pod(securityContext={"runAsNonRoot": True})
    p["metadata"]["annotations"] = {
        "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
        "container.seccomp.security.alpha.kubernetes.io/jax": "docker/default",
    }
    assert check(p, "baseline", "v1.18") == [
        'seccompProfile (forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined")'
    ]
    assert check(p, "baseline", "v1.19") == []


def test_table_is_in_upstream_evaluation_order() -> None:
    ids = [c.id for c in ps.CHECKS]
    assert len(set(ids)) == len(ids)
    assert ids == (
        sorted(c.id for c in ps.CHECKS if c.level == ps.BASELINE)
        + sorted(c.id for c in ps.CHECKS if c.level == ps.RESTRICTED)
    )
    for c in ps.CHECKS:
        assert [r.since for r in c.revisions] == sorted({r.since for r in c.revisions})


# --- namespace labels ----------------------------------------------------------------------------------------------


def test_namespace_without_labels_is_privileged() -> None:
    assert ps.levels({}) == ps.Levels("privileged", "latest", "privileged", "latest", "privileged", "latest")
    assert ps.levels({"kubernetes.io/metadata.name": "default"}).fully_privileged()
    anything = pod(hostNetwork=True, hostPID=True)
    jax(anything)["securityContext"] = {"privileged": True}
    assert ps.admit(anything, {"kubernetes.io/metadata.name": "default"}) == []


def test_levels_reads_the_labels() -> None:
    lv = ps.levels(
        {
            ps.ENFORCE: "baseline",
            ps.ENFORCE_VERSION: "v1.30",
            ps.WARN: "restricted",
            ps.WARN_VERSION: "latest",
            ps.AUDIT: "restricted",
            ps.AUDIT_VERSION: "v1.29",
        }
    )
    assert lv == ps.Levels("baseline", "v1.30", "restricted", "latest", "restricted", "v1.29")
    # warn unset follows a stricter explicit enforce, version included unless warn-version is set
    assert ps.levels({ps.ENFORCE: "restricted", ps.ENFORCE_VERSION: "v1.31"}) == ps.Levels(
        "restricted", "v1.31", "restricted", "v1.31", "privileged", "latest"
    )
    assert ps.levels({ps.ENFORCE: "restricted", ps.WARN_VERSION: "v1.30"}).warn_version == "v1.30"
    assert ps.levels({ps.ENFORCE: "baseline", ps.WARN: "privileged"}).warn == "privileged"


def test_invalid_labels_fail_closed_for_enforce_and_open_for_warn_and_audit() -> None:
    lv = ps.levels({ps.ENFORCE: "strict", ps.ENFORCE_VERSION: "1.30", ps.WARN: "Baseline", ps.AUDIT: ""})
    assert lv == ps.Levels("restricted", "latest", "privileged", "latest", "privileged", "latest")
    assert ps.levels({ps.ENFORCE: "strict"}).warn == "privileged"  # an invalid enforce is not copied to warn
    for bad in ("v1.05", "v2.0", "v1", "latest ", "v1.30.1"):
        assert ps.levels({ps.ENFORCE: "baseline", ps.ENFORCE_VERSION: bad}).enforce_version == "latest"
    assert ps.levels({ps.ENFORCE_VERSION: "v1.0"}).enforce_version == "v1.0"


def test_namespace_with_invalid_labels_is_refused() -> None:
    ns = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ml", "labels": {ps.ENFORCE: "strict", ps.WARN: "restricted", ps.WARN_VERSION: 'v1."30'}},
    }
    assert ps.admit(ns, {}) == [
        Finding(
            ("metadata", "labels", ps.ENFORCE),
            "strict",
            'Invalid value: "strict": must be one of privileged, baseline, restricted',
            "use privileged, baseline or restricted",
        ),
        Finding(
            ("metadata", "labels", ps.WARN_VERSION),
            'v1."30',
            'Invalid value: "v1.\\"30": must be "latest" or "v1.x"',
            'use "latest" or a version such as "v1.30"',
        ),
    ]
    ns["metadata"]["labels"] = {ps.AUDIT: "base\tline\x00"}
    assert [f.message for f in ps.admit(ns, {})] == [
        'Invalid value: "base\\tline\\x00": must be one of privileged, baseline, restricted'
    ]
    ns["metadata"]["labels"] = {ps.ENFORCE: "restricted", ps.ENFORCE_VERSION: "v1.30"}
    assert ps.admit(ns, {}) == []


# --- texts, pods and workloads ---------------------------------------------------------------------------------------


def test_refusal_and_warning_texts() -> None:
    reasons = [
        "host namespaces (hostNetwork=true)",
        'privileged (container "jax" must not set securityContext.privileged=true)',
    ]
    assert ps.refusal("baseline", "v1.30", reasons) == (
        'violates PodSecurity "baseline:v1.30": host namespaces (hostNetwork=true), privileged (container "jax" '
        "must not set securityContext.privileged=true)"
    )
    assert ps.warning("restricted", "latest", reasons[:1]) == (
        'would violate PodSecurity "restricted:latest": host namespaces (hostNetwork=true)'
    )


def test_pod_admitted_by_enforce_is_warned_by_warn() -> None:
    p = pod(hostNetwork=False)
    _no_seccomp(p)
    labels = {ps.ENFORCE: "baseline", ps.WARN: "restricted"}
    [finding] = ps.admit(p, labels)
    assert finding.warning and finding.at == ("spec",)
    assert finding.message == (
        'would violate PodSecurity "restricted:latest": seccompProfile (pod or container "jax" '
        'must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
    )
    # refused: no warning on top of the refusal
    [refused] = ps.admit(pod(hostNetwork=True), {**labels, ps.ENFORCE: "restricted"})
    assert not refused.warning and refused.message.startswith('violates PodSecurity "restricted:latest": host ')


def job(template_spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {
            "completions": 2,
            "parallelism": 2,
            "completionMode": "Indexed",
            "template": {"metadata": {"labels": {"app": "trainer"}}, "spec": template_spec},
        },
    }


def test_workload_is_only_warned_never_refused() -> None:
    template = pod(hostNetwork=True)["spec"]
    [finding] = ps.admit(job(template), RESTRICTED_NS)
    assert finding.warning and finding.at == ("spec", "template", "spec")
    assert finding.message == 'would violate PodSecurity "restricted:latest": host namespaces (hostNetwork=true)'
    assert ps.admit(job(pod()["spec"]), RESTRICTED_NS) == []
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": job(template)},
    }
    [finding] = ps.admit(cron, RESTRICTED_NS)
    assert finding.warning and finding.at == ("spec", "jobTemplate", "spec", "template", "spec")
    # enforce alone (warn set to privileged) warns nothing on a workload
    assert ps.admit(job(template), {**RESTRICTED_NS, ps.WARN: "privileged"}) == []


def test_custom_resources_are_not_checked() -> None:
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "trainer"},
        "spec": {
            "replicatedJobs": [
                {"name": "workers", "replicas": 1, "template": {"spec": job(pod(hostNetwork=True)["spec"])["spec"]}}
            ]
        },
    }
    assert ps.pod_template(jobset) is None
    assert ps.admit(jobset, RESTRICTED_NS) == []


def test_exemptions() -> None:
    bare = pod(securityContext={})
    jax(bare)["securityContext"] = {}
    assert ps.admit(bare, RESTRICTED_NS)
    assert ps.admit(bare, RESTRICTED_NS, ps.Exemptions(namespaces=frozenset({"ml"}))) == []
    bare["spec"]["runtimeClassName"] = "gvisor"
    assert ps.admit(bare, RESTRICTED_NS, ps.Exemptions(runtime_classes=frozenset({"gvisor"}))) == []
    assert ps.admit(bare, RESTRICTED_NS, ps.Exemptions(runtime_classes=frozenset({"kata"})))


def test_odd_input_never_raises() -> None:
    odd_specs: list[Any] = [
        None,
        "x",
        {"containers": "x"},
        {"containers": [None, 3, {"securityContext": "x"}]},
        {"securityContext": [], "volumes": [{"hostPath": None}], "initContainers": [{}]},
        {"containers": [{"ports": [{"hostPort": True}], "securityContext": {"runAsUser": False}}]},
    ]
    for spec in odd_specs:
        for level in ("baseline", "restricted", "nonsense"):
            ps.violations(level, "v1.x", {"annotations": "x"}, spec)
    # a container without a name, and a volume whose hostPath is null, are read as Go would decode them
    assert ps.violations("baseline", "latest", {}, {"volumes": [{"name": "v", "hostPath": None}]}) == []
    assert ps.violations("restricted", "latest", {}, {"containers": [{}]})[0] == (
        'allowPrivilegeEscalation != false (container "" must set securityContext.allowPrivilegeEscalation=false)'
    )
    assert ps.admit({"kind": "Job", "spec": {}}, RESTRICTED_NS) == []


# --- what jaxinfra renders ------------------------------------------------------------------------------------------


def pod_specs(node: Any) -> Iterator[Mapping]:
    """Every pod spec inside a rendered object (a mapping with a containers list), wherever the kind keeps it."""
    if isinstance(node, Mapping):
        if isinstance(node.get("containers"), list):
            yield node
        for value in node.values():
            yield from pod_specs(value)
    elif isinstance(node, list):
        for value in node:
            yield from pod_specs(value)


DAEMONS = {s.daemon.name for s in gpudirect.STACKS if s.daemon}


def gpudirect_exception(violation: str) -> bool:
    """A restricted violation a GPUDirect pod declares (JobPlan.pod_security_exceptions): its host volumes, its daemon
    running as root with capabilities."""
    return violation.startswith(("hostPath volumes", "restricted volume types")) or any(
        f'container "{d}"' in violation for d in DAEMONS
    )


@pytest.mark.parametrize("path, backend", PAIRS, ids=PAIR_IDS)
def test_every_rendered_pod_passes_restricted(path: Any, backend: str) -> None:
    """Every pod meets restricted but for a GPUDirect pool's declared exceptions, which appear where they are declared
    and nowhere else."""
    specs = [s for obj in rendered(path, backend) for s in pod_specs(copy.deepcopy(obj))]
    assert specs
    declared = any(jp.gpudirect for jp in plan(load_stack(path, backend)).jobs)
    for spec in specs:
        violations = ps.violations("restricted", "latest", {}, spec)
        assert [v for v in violations if not gpudirect_exception(v)] == []
        assert bool(violations) == declared
        if declared:  # baseline: the host volumes and the daemon's added capabilities, nothing else
            assert {v.split(" (")[0] for v in ps.violations("baseline", "latest", {}, spec)} == {
                "hostPath volumes",
                "non-default capabilities",
            }
