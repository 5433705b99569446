"""GPU JobSets in xpk's style simulate (issue 25, part 4): hostPath volumes emulated (an empty folder of the pod's own
node, read-only where mounted so, `--host-path PATH=DIR` to map one; the node's /sys and /proc/sys as the container's
own, read-only), the platform's daemons stood in (the GPUDirect-TCPX and -TCPXO receive-datapath managers, GKE's
Cloud Storage FUSE sidecar), volumes at /tmp and over the simulator's own Python, and the coordinator check applied
to what JAX itself reads: a host-only JAX_COORDINATOR_ADDRESS with JAX_COORDINATOR_PORT beside it is a note under
`--run-command` (the program joins them), a refusal under the probe.

The manifests are written here in the style xpk renders (AI-Hypercomputer/xpk @367c8382
src/xpk/core/workload_decorators/tcpx_decorator.py, tcpxo_decorator.py; the regular-container daemon of xpk
@59ed3e78^ src/xpk/templates/rxdm_container_a3mega.yaml), with the tests' own programs. Hostile hostPaths (`/`,
`/etc`, `/root`, the canaries' own absolute path, `..`) never touch the machine, as root and as uid 65534.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from jaxinfra import simulate_flags, yamlio
from jaxinfra.errors import SpecError
from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.core.inputs import load_files
from jaxinfra_sim.platform import gcsfuse, standins
from jaxinfra_sim.runtime import rootfs, runc
from tests.support import unprivileged
from tests.support.cli import simulate_as, simulate_cli
from tests.support.one_pod import one_pod_job
from tests.support.paths import MANIFESTS, ROOT
from tests.support.problems import one_problem, problems_of
from tests.support.trees import tree_snapshot

pytestmark = pytest.mark.simulator

A3_HIGH = MANIFESTS / "jobset_gpu_a3high_xpk_style.yaml"
A3_MEGA = MANIFESTS / "jobset_gpu_a3mega_xpk_style.yaml"
FAST = ("--run-command", "--init-timeout", "60", "--grace-cap", "1")  # sidecars stopped within a second


def job(
    command: str,
    volumes: str,
    mounts: str,
    *,
    name: str = "hp",
    namespace: str = "default",
    extra: str = "",
    containers: str = "",
) -> str:
    """A one-pod Indexed Job whose container `w` runs `command` (with --run-command), with these volumes and mounts,
    and `containers` (YAML list items) after it."""
    return one_pod_job(command, volumes, mounts, name=name, namespace=namespace, extra=extra, containers=containers)


def jobset(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The JobSet among the documents of an xpk-style manifest (after xpk's identity and queue)."""
    [found] = [d for d in docs if d["kind"] == "JobSet"]
    return found


def write(tmp: Path, text: str) -> Path:
    path = tmp / "manifest.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def containers_of(report: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Each pod's other containers, in the first attempt."""
    return [p["containers"] for p in report["workloads"][0]["attempts"][0]["pods"]]


# --- xpk's A3 High and A3 Mega JobSets ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "manifest, daemon", [(A3_HIGH, "tcpx-daemon"), (A3_MEGA, "tcpxo-daemon")], ids=["a3-high", "a3-mega"]
)
def test_xpk_style_gpu_jobsets_simulate_with_their_daemons_stood_in(
    manifest: Path, daemon: str, tmp_path: Path
) -> None:
    rc, report, out = simulate_cli(str(manifest), *FAST, tmp=tmp_path)
    [w] = report["workloads"]
    assert rc == 0 and w["verdict"] == "succeeded", out
    for others in containers_of(report):
        [sidecar] = others
        assert (sidecar["name"], sidecar["role"]) == (daemon, "sidecar")
        assert any("stood in" in line for line in sidecar["stderr_tail"]), sidecar
    notes = " | ".join(report["notes"])
    assert f"container {daemon} (us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx" in notes and "stood in" in notes
    assert "hostPath volume sys (/sys) shows the container's own /sys, read-only" in notes
    assert "hostPath volume libraries (/home/kubernetes/bin/nvidia" in notes and "empty folder" in notes
    # unchanged, with xpk's identity and queue: its ServiceAccount, and Kueue admitting it through xpk's LocalQueue
    assert "admitted by Kueue to ClusterQueue cluster-queue via LocalQueue default/multislice-queue" in " ".join(
        w["notes"]
    )
    [joined] = [n for n in w["notes"] if "JAX_COORDINATOR_PORT" in n]
    assert "the program must join them" in joined and "checked as" in joined and ":6002" in joined


@pytest.mark.unit
def test_the_tcpx_socket_folder_is_one_per_node_shared_by_its_containers() -> None:
    """Each simulated pod is its own node: its containers share a hostPath (the daemon's /run/tcpx is the main
    container's /tmp), other pods' do not."""
    [w] = emulate(load_files([A3_HIGH]), check_all=False).workloads
    nodes = set()
    for pod in w.pods:
        [daemon] = pod.others
        mine = {m.volume: m for m in pod.mounts}["tcpx-socket"]
        theirs = {m.volume: m for m in daemon.mounts}["tcpx-socket"]
        assert (mine.kind, mine.key, mine.path, theirs.path) == ("hostPath", "/run/tcpx", "/tmp", "/run/tcpx")
        assert mine.node == theirs.node == pod.node
        nodes.add(mine.node)
    assert len(nodes) == len(w.pods) == 2


def test_a_regular_tcpxo_daemon_container_exits_when_the_main_container_says_so(tmp_path: Path) -> None:
    """xpk before its native sidecars: the daemon is a second main container that starts the daemon in the
    background and waits for the file the main container writes when it ends; stood in, the pod completes."""
    daemon = textwrap.dedent("""\
        - name: tcpxo-daemon
          image: us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.9
          command: [bash, -c]
          args:
          - |
            set -ex; chmod 755 /fts/entrypoint_rxdm_container.sh
            /fts/entrypoint_rxdm_container.sh --num_hops=2 --num_nics=8 --uid= --alsologtostderr &
            while [ ! -e "/usr/share/workload/workload_terminated" ]; do sleep 0.2; echo "sleeping"; done
          securityContext: {privileged: true}
          volumeMounts:
          - {name: libraries, mountPath: /usr/local/nvidia/lib64}
          - {name: workload-terminated-volume, mountPath: /usr/share/workload}
        """)
    text = job(
        "sleep 1; echo Main app is done > /usr/share/workload/workload_terminated",
        "[{name: libraries, hostPath: {path: /home/kubernetes/bin/nvidia/lib64}}, "
        "{name: workload-terminated-volume, emptyDir: {}}]",
        "[{name: workload-terminated-volume, mountPath: /usr/share/workload}]",
        containers=daemon,
    )
    rc, report, out = simulate_cli(str(write(tmp_path, text)), *FAST, tmp=tmp_path)
    assert rc == 0 and report["workloads"][0]["verdict"] == "succeeded", out
    [[container]] = containers_of(report)
    assert (container["name"], container["role"], container["exit_code"]) == ("tcpxo-daemon", "main", 0)


# --- hostPath: read-only, mapped, type checks --------------------------------------------------------------------


def test_a_read_only_host_path_cannot_be_written(tmp_path: Path) -> None:
    text = job(
        "echo x > /ro/file",
        "[{name: data, hostPath: {path: /var/lib/data, type: DirectoryOrCreate}}]",
        "[{name: data, mountPath: /ro, readOnly: true}]",
    )
    rc, report, out = simulate_cli(str(write(tmp_path, text)), "--run-command", tmp=tmp_path)
    [pod] = report["workloads"][0]["attempts"][0]["pods"]
    assert rc == 1 and report["workloads"][0]["verdict"] == "failed" and pod["exit_code"] != 0, out
    assert any("Read-only file system" in line for line in pod["stderr_tail"]), pod["stderr_tail"]


def test_host_path_maps_a_folder_of_yours(tmp_path: Path) -> None:
    mine = tmp_path / "shared"
    mine.mkdir()
    mine.chmod(0o777)  # as root the container's root is a shifted id (runtime.id_base()): the folder must let it write
    (mine / "canary").write_text("from the user\n")
    text = job(
        "grep -q 'from the user' /mnt/shared/canary && echo written > /mnt/shared/out",
        "[{name: shared, hostPath: {path: /data/shared}}]",
        "[{name: shared, mountPath: /mnt/shared}]",
    )
    rc, report, out = simulate_cli(
        str(write(tmp_path, text)), "--run-command", "--host-path", f"/data/shared={mine}", tmp=tmp_path
    )
    assert rc == 0, out
    assert (mine / "out").read_text() == "written\n", "the pod wrote into the folder the user mapped"
    assert any(f"is {mine} (--host-path), read-write" in n for n in report["notes"]), report["notes"]
    if os.getuid() == 0:
        assert (mine / "out").stat().st_uid == runc.id_base()  # the container's root's, not the machine's
        assert any(f"{mine} is written as that id" in n for n in report["notes"]), report["notes"]


def test_a_mapped_host_path_of_the_wrong_type_stops_before_anything_starts(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    text = job("true", "[{name: c, hostPath: {path: /etc/app.conf, type: File}}]", "[{name: c, mountPath: /c}]")
    rc, report, out = simulate_cli(
        str(write(tmp_path, text)), "--run-command", "--host-path", f"/etc/app.conf={folder}", tmp=tmp_path
    )
    assert rc == 1 and report["workloads"][0]["attempts"] == [], out  # on a cluster: ContainerCreating, for ever
    assert f"hostPath type check failed: {folder} is not a file, it's a Directory" in out
    assert "volume c hostPath.type" in out and "fix: map /etc/app.conf to a file" in out


@pytest.mark.unit
@pytest.mark.parametrize(
    "value, why",
    [
        ("/data", "expected PATH=DIR"),
        ("/sys=/tmp", "already shows the container's own /sys, read-only"),
        ("/proc/sys/net=/tmp", "already shows the container's own /proc/sys/net"),
        ("/x=/nonexistent-jaxinfra", "no such folder or file"),
        ("/x=/proc/self", "is a kernel filesystem of this machine"),
        ("/a/../b=/tmp", "contains '..'"),
    ],
)
def test_host_path_option_errors_name_the_option_the_value_and_the_fix(value: str, why: str) -> None:
    with pytest.raises(SpecError) as err:
        simulate_flags.host_paths([value])
    [problem] = err.value.problems
    assert (problem.path, problem.value) == ("--host-path", value) and why in problem.message and problem.fix


def test_a_bad_host_path_option_exits_2(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "simulate", str(A3_HIGH), "--host-path", "/run/tcpx"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert r.returncode == 2 and "--host-path = '/run/tcpx': expected PATH=DIR" in r.stdout + r.stderr


@pytest.mark.unit
def test_host_path_types_as_the_kubelet_knows_them() -> None:
    """An unknown type leaves the pod Pending with the kubelet's words; the known ones run, each with its note."""
    text = job("true", "[{name: d, hostPath: {path: /d, type: Folder}}]", "[{name: d, mountPath: /d}]")
    problem = one_problem(emulate(yamlio.load(text)), "volume d")
    assert "Folder is an invalid volume type" in problem.message and "stays Pending" in problem.message
    assert "DirectoryOrCreate" in problem.fix
    for kind in ("", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket", "CharDevice", "BlockDevice"):
        text = job("true", f"[{{name: d, hostPath: {{path: /d, type: {kind!r}}}}}]", "[{name: d, mountPath: /d}]")
        assert problems_of(emulate(yamlio.load(text))) == [], kind


# --- hostile hostPaths ---------------------------------------------------------------------------------------------

HOSTILE = {
    "/": "/host",
    "/etc": "/host-etc",
    "/root": "/host-root",
    "/etc/passwd": "/host-passwd",
}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
def test_hostile_host_paths_never_touch_the_machine(as_root: bool) -> None:
    """hostPaths of `/`, `/etc`, `/root`, `/etc/passwd` and the canaries' own absolute folder, unmapped, are the pod's
    node's empty folders: the pod sees none of the machine's files there, and everything it writes stays there."""
    home = unprivileged.scratch_home()
    try:
        canary = home / "canary"
        canary.mkdir()
        (canary / "file").write_text("canary\n")
        if os.getuid() == 0 and not as_root:
            for path in (canary, canary / "file"):
                os.chown(path, unprivileged.NOBODY, unprivileged.NOBODY)  # the attack could write them
        places = {**HOSTILE, str(canary): "/canary"}
        volumes = [
            {"name": f"v{i}", "hostPath": {"path": path, **({"type": "File"} if path.endswith("passwd") else {})}}
            for i, path in enumerate(places)
        ]
        mounts = [{"name": f"v{i}", "mountPath": at} for i, at in enumerate(places.values())]
        script = (
            'set -e; test -z "$(ls -A /canary)"; ! grep -q root: /host-passwd; test ! -e /host-etc/hostname; '
            "echo pwned > /canary/file; echo pwned > /host-passwd; echo pwned > /host-etc/hostname; "
            "touch /host/jaxinfra-pwned /host-etc/jaxinfra-pwned /host-root/jaxinfra-pwned"
        )
        text = job(script, json.dumps(volumes), json.dumps(mounts))
        watched = [Path("/etc/passwd"), Path("/etc/hostname")]
        before = {p: _digest(p) for p in watched if p.exists()}
        rc, out, _ = simulate_as(home, text, "--run-command", as_root=as_root)
        assert rc == 0, out
        assert (canary / "file").read_text() == "canary\n" and sorted(p.name for p in canary.iterdir()) == ["file"]
        assert {p: _digest(p) for p in before} == before
        for path in ("/jaxinfra-pwned", "/etc/jaxinfra-pwned", "/root/jaxinfra-pwned"):
            assert not Path(path).exists(), path
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)


@pytest.mark.parametrize("path", ["/tmp/../etc", "../etc", "/var/../../root"])
def test_host_paths_that_climb_are_refused_at_the_front_door(path: str, tmp_path: Path) -> None:
    before = tree_snapshot(tmp_path)
    text = job("true", json.dumps([{"name": "up", "hostPath": {"path": path}}]), "[{name: up, mountPath: /up}]")
    manifest = write(tmp_path, text)
    rc, report, out = simulate_cli(str(manifest), "--run-command", tmp=tmp_path)
    assert rc == 2 and "spec.template.spec.volumes[0].hostPath.path" in out and "must not contain '..'" in out, out
    manifest.unlink()
    ours = ("/report-", "/tmp-")  # simulate_cli's report and (emptied) TMPDIR
    assert {k: v for k, v in tree_snapshot(tmp_path).items() if not any(o in k for o in ours)} == before


# --- volumes at any path ------------------------------------------------------------------------------------------


def test_volumes_at_tmp_dev_shm_and_over_the_simulators_own_python(tmp_path: Path) -> None:
    """xpk's A3 High mounts a volume at /tmp and one at /dev/shm; a volume over a folder that holds the simulator's
    own Python (a virtual environment under /tmp, pyenv under /root) does not hide it: the program still runs."""
    paths = ["/tmp", "/dev/shm"]
    python = rootfs.machine().python
    # this machine's Python lives in a folder a container sees empty: cover that folder too (a venv under /tmp, as in
    # CI's fresh clone, is under the /tmp volume already)
    top = "/" + python[0].strip("/").split("/")[0] if python else None
    if top is not None and top not in paths:
        paths.append(top)
    volumes = json.dumps([{"name": f"v{i}", "emptyDir": {}} for i in range(len(paths))])
    mounts = json.dumps([{"name": f"v{i}", "mountPath": p} for i, p in enumerate(paths)])
    script = "set -e; " + "; ".join(f"touch {p}/ok" for p in paths) + "; python -c 'import jax; jax.devices()'"
    rc, report, out = simulate_cli(str(write(tmp_path, job(script, volumes, mounts))), "--run-command", tmp=tmp_path)
    assert rc == 0 and report["workloads"][0]["verdict"] == "succeeded", out


def test_the_nodes_kernel_filesystems_are_the_containers_own_read_only(tmp_path: Path) -> None:
    """hostPaths of /sys and /proc/sys, as xpk's daemons mount them (and over the container's own /sys): the
    container's own views, readable, never writable; JAX still runs."""
    script = (
        'set -e; test -s /hostsysfs/devices/system/cpu/online; test "$(cat /hostprocsysfs/kernel/hostname)" = hp-0; '
        "! touch /hostsysfs/x 2>/dev/null; ! sh -c 'echo 1 > /hostprocsysfs/vm/drop_caches' 2>/dev/null; "
        "python -c 'import jax; jax.devices()'"
    )
    volumes = "[{name: sys, hostPath: {path: /sys}}, {name: proc-sys, hostPath: {path: /proc/sys}}]"
    mounts = (
        "[{name: sys, mountPath: /hostsysfs}, {name: sys, mountPath: /sys}, "
        "{name: proc-sys, mountPath: /hostprocsysfs}]"
    )
    rc, report, out = simulate_cli(str(write(tmp_path, job(script, volumes, mounts))), "--run-command", tmp=tmp_path)
    assert rc == 0, out


# --- the coordinator: what JAX itself reads ------------------------------------------------------------------------


@pytest.mark.unit
def test_under_the_probe_a_host_only_coordinator_is_refused() -> None:
    """The probe calls jax.distributed.initialize() from the env, which takes JAX_COORDINATOR_ADDRESS as it is."""
    problem = one_problem(emulate(load_files([A3_HIGH])), "JAX_COORDINATOR_ADDRESS must be host:port")
    assert "JAX_COORDINATOR_PORT (6002) is read only when JAX detects the cluster itself" in problem.message
    assert problem.fix == "set JAX_COORDINATOR_ADDRESS to a3high-slice-job-0-0.a3high:6002"


@pytest.mark.unit
def test_a_bare_initialize_under_run_command_is_refused_too() -> None:
    docs = load_files([A3_HIGH])
    container = jobset(docs)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["args"] = ["import jax; jax.distributed.initialize()"]
    problem = one_problem(emulate(docs, check_all=False), "JAX_COORDINATOR_ADDRESS must be host:port")
    assert "this command calls jax.distributed.initialize()" in problem.message


@pytest.mark.unit
def test_the_joined_address_is_still_checked() -> None:
    """The host must resolve to rank 0 and the port be a port number; a port rank 0 does not declare is a note (a
    container's ports are informational on a cluster)."""
    docs = load_files([A3_HIGH])
    pod = jobset(docs)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["ports"] = [{"containerPort": 8080}]
    [workload] = emulate(docs, check_all=False).workloads
    assert not [p for p in workload.problems if "6002" in str(p)]
    assert any("listens on port 6002" in n and "(ports [8080])" in n for n in workload.notes), workload.notes
    env = pod["containers"][0]["env"]
    next(e for e in env if e["name"] == "JAX_COORDINATOR_ADDRESS")["value"] = "nowhere.a3high"
    one_problem(emulate(docs, check_all=False), "host 'nowhere.a3high' does not resolve")
    next(e for e in env if e["name"] == "JAX_COORDINATOR_PORT")["value"] = "http"
    one_problem(emulate(docs, check_all=False), "JAX_COORDINATOR_PORT is not a port number")


# --- the platform's images, one table --------------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(
    "image, repository",
    [
        ("us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.11", "gpudirect-tcpx"),
        ("us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev@sha256:" + "0" * 64, "gpudirect-tcpxo"),
        ("gke.gcr.io/gcs-fuse-csi-driver-sidecar-mounter:v1.17.2-gke.0", "gcs-fuse"),
        ("localhost:5000/gcs-fuse-csi-driver-sidecar-mounter", None),
        ("python:3.11", None),
    ],
)
def test_stood_in_images_are_recognised_by_their_repository(image: str, repository: str | None) -> None:
    found = standins.lookup(image)
    assert (found is not None and repository in found.repositories[0]) if repository else found is None


@pytest.mark.unit
def test_gkes_webhook_injects_the_gcs_fuse_sidecar_which_is_stood_in() -> None:
    [w] = emulate(load_files([MANIFESTS / "indexed_job_volumes.yaml"]), check_all=False).workloads
    for pod in w.pods:
        [sidecar] = pod.others
        assert (sidecar.name, sidecar.role, sidecar.image) == (
            "gke-gcsfuse-sidecar",
            "sidecar",
            gcsfuse.GCSFUSE_IMAGE,
        )
        assert sidecar.command == ("/gcs-fuse-csi-driver-sidecar-mounter",) and sidecar.args == ("--v=5",)
        assert (sidecar.security.uid, sidecar.env["NATIVE_SIDECAR"]) == (65534, "TRUE")
        assert {m.path for m in sidecar.mounts} == {"/gcsfuse-tmp", "/gcsfuse-buffer", "/gcsfuse-cache"}
    spec = {"containers": [{"name": "w"}, {"name": "gke-gcsfuse-sidecar", "image": "mirror.example/mounter:v1"}]}
    injected = gcsfuse.gcsfuse_webhook(spec, {"gke-gcsfuse/volumes": "True"})
    assert [c["name"] for c in injected["containers"]] == ["w"]
    assert [(c["name"], c["image"]) for c in injected["initContainers"]] == [
        ("gke-gcsfuse-sidecar", "mirror.example/mounter:v1")
    ]
    assert gcsfuse.gcsfuse_webhook(injected, {"gke-gcsfuse/volumes": "true"}) is injected
    assert gcsfuse.gcsfuse_webhook(spec, {"gke-gcsfuse/volumes": "false"}) is spec


@pytest.mark.unit
@pytest.mark.parametrize("level", ["baseline", "restricted"])
def test_pod_security_still_refuses_host_paths(level: str) -> None:
    """The simulator emulates hostPath volumes; Pod Security's `baseline` and `restricted` still refuse the pods."""
    namespace = (
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ml\n"
        f"  labels: {{pod-security.kubernetes.io/enforce: {level}}}\n---\n"
    )
    text = job(
        "true",
        "[{name: h, hostPath: {path: /run/tcpx}}]",
        "[{name: h, mountPath: /tmp}]",
        namespace="ml",
        extra=namespace,
    )
    problem = one_problem(emulate(yamlio.load(text), check_all=False), "violates PodSecurity")
    assert f'"{level}:latest"' in problem.message and 'volume "h"' in problem.message and "hostPath" in problem.message
