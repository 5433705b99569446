"""Simulated pods cannot touch the machine: the acceptance tests of the pod sandbox (simulate/sandbox.py, rootfs.py,
security.py, cgroups.py, netns.py).

Manifests in the style of the Kubernetes docs' Pod Security and security-context examples (an Indexed Job of
busybox:1.28, `restartPolicy: Never`, `backoffLimit: 0`), run with --run-command: each container's shell script
runs this machine's tools inside its sandbox and writes what it sees to stderr, one KEY=value a line, which the
JSON report keeps (a pod's `stderr_tail`). The test then compares that with the machine: its files (content and
mtime), its /root and $HOME, its /etc/shadow, its site-packages, its network. As root and, for the key ones, as
uid 65534 (tests/support/unprivileged.py), as most people run the simulator.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import site
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jaxinfra.yamlio import dump
from tests.support import unprivileged
from tests.support.paths import ROOT
from tests.support.trees import tree_snapshot

pytestmark = pytest.mark.simulator

IMAGE = "busybox:1.28"
APP_IMAGE = "registry.example/app:1"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_CAPS = 0x00000000A80425FB  # containerd's 14 default capabilities
NET_ADMIN = 12
ROOT_ONLY = pytest.mark.skipif(os.getuid() != 0, reason="needs root (the suite runs as root in CI)")
MODES = pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
#: Prints the container process's own (the shell's, PID 1's) capability sets and no_new_privs, KEY=value. (In a
#: container's command Kubernetes reads `$$` as an escaped `$`, so the shell's `$$` is written `$$$$`.)
CAPS = (
    'while read k v; do case "$k" in CapEff:|CapBnd:|NoNewPrivs:) echo "${k%:}=$v" >&2;; esac; done < /proc/$$$$/status'
)


# --- manifests and runs -----------------------------------------------------------------------------------------


def job(
    name: str,
    script: str,
    *,
    pod_sc: dict[str, Any] | None = None,
    sc: dict[str, Any] | None = None,
    image: str = IMAGE,
    pods: int = 1,
    volumes: list[dict[str, Any]] | None = None,
    mounts: list[dict[str, Any]] | None = None,
    env: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """An Indexed Job whose container runs `sh -c script`; `extra` goes into the container (workingDir, resources)
    except `automountServiceAccountToken`, which is the pod's."""
    container: dict[str, Any] = {"name": "main", "image": image, "command": ["sh", "-c", script]}
    if sc is not None:
        container["securityContext"] = sc
    if mounts:
        container["volumeMounts"] = mounts
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if "automountServiceAccountToken" in extra:
        pod["automountServiceAccountToken"] = extra.pop("automountServiceAccountToken")
    container.update(extra)
    if pod_sc is not None:
        pod["securityContext"] = pod_sc
    if volumes:
        pod["volumes"] = volumes
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "backoffLimit": 0,
            "template": {"spec": pod},
        },
    }


def sim_argv(manifest: Path, report: Path, *args: str, logs: bool = False) -> list[str]:
    return [
        sys.executable,
        "-m",
        "jaxinfra",
        "simulate",
        str(manifest),
        "--run-command",
        "--json",
        str(report),
        "--timeout",
        "60",
        *([] if logs else ["--no-logs"]),
        *args,
    ]


def simulate(
    home: Path,
    jobs: list[dict[str, Any]],
    *args: str,
    as_root: bool = True,
    env: dict[str, str] | None = None,
    **run: Any,
) -> tuple[int, dict[str, Any], str]:
    """`jaxinfra simulate --run-command` of `jobs`, with HOME and TMPDIR `home` (as uid 65534 unless `as_root`):
    status, JSON report, output. Never a traceback. `run`: more for `subprocess.run` (its stdin, descriptors)."""
    manifest, report = home / "job.yaml", home / "report.json"
    manifest.write_text(dump(jobs), encoding="utf-8")
    r = unprivileged.run(
        sim_argv(manifest, report, *args),
        home,
        as_root=as_root,
        env=env or {},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
        **run,
    )
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out
    assert report.exists(), out
    data = json.loads(report.read_text())
    manifest.unlink()
    report.unlink()
    return r.returncode, data, out


def pods(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every pod of the first attempt of each workload, by hostname."""
    return {p["hostname"]: p for w in report["workloads"] for p in (w["attempts"][0]["pods"] if w["attempts"] else [])}


def seen(pod: dict[str, Any]) -> dict[str, str]:
    """What the pod's script reported: its KEY=value lines on stderr."""
    out = {}
    for line in pod["stderr_tail"]:
        key, sep, value = line.partition("=")
        if sep and key.isupper() and key.replace("_", "").isalnum():
            out[key] = value
    return out


def owned(path: Path) -> Path:
    """`path` and all beneath it given to uid 65534 when root: were the sandbox to leak, the unprivileged
    simulator's pods could write there."""
    if os.getuid() == 0:
        for p in [path, *path.rglob("*")]:
            os.chown(p, unprivileged.NOBODY, unprivileged.NOBODY, follow_symlinks=False)
    return path


@pytest.fixture
def canary() -> Iterator[Path]:
    """A folder of the machine that pods see at the same path (in /usr, one of the system folders a container's root
    takes, `rootfs.SYSTEM`; right in it: an unprivileged user's overlay cannot copy up a folder of an id it does not
    map, such as root's /usr/local, EOVERFLOW)."""
    folder = Path(f"/usr/jaxinfra-canary-{secrets.token_hex(4)}")
    if not os.access("/usr", os.W_OK):
        pytest.skip("/usr is not writable here")
    folder.mkdir()
    (folder / "a").write_text("machine's a\n")
    (folder / "b").write_text("machine's b\n")
    folder.chmod(0o755)
    yield owned(folder)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def root_canary() -> Iterator[Path]:
    """A file in root's home (/root), which no pod may see."""
    if os.getuid() != 0:
        pytest.skip("needs root to plant a file in /root")
    path = Path(f"/root/.jaxinfra-canary-{secrets.token_hex(4)}")
    path.write_text("root's own\n")
    yield path
    path.unlink(missing_ok=True)


# --- 1. identity ------------------------------------------------------------------------------------------------

#: The docs' security-context-demo (tasks/configure-pod-container/security-context), its sleep replaced by the checks.
DEMO = job(
    "security-context-demo",
    "echo UID=$(id -u) >&2; echo GID=$(id -g) >&2; echo GROUPS=$(id -G) >&2; "
    "echo hello > /data/demo/testfile && echo FILE_GROUP=$(stat -c %g /data/demo/testfile) >&2",
    pod_sc={"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000},
    volumes=[{"name": "sec-ctx-vol", "emptyDir": {}}],
    mounts=[{"name": "sec-ctx-vol", "mountPath": "/data/demo"}],
)


@MODES
def test_run_as_user_group_and_fs_group(home: Path, as_root: bool) -> None:
    rc, report, out = simulate(home, [DEMO], as_root=as_root)
    pod = pods(report)["security-context-demo-0"]
    got = seen(pod)
    assert rc == 0 and pod["exit_code"] == 0, out
    assert (got["UID"], got["GID"]) == ("1000", "3000"), got
    assert (pod["security"]["uid"], pod["security"]["gid"], pod["security"]["groups"]) == (1000, 3000, [2000])
    # Unprivileged too: the container's ids are the caller's subordinate ids (tests/support/unprivileged.py gives
    # uid 65534 useradd's range), so the groups are set; only the volume's ownership is root's to give.
    assert "2000" in got["GROUPS"].split(), got
    if as_root:
        assert pod["security"]["not_applied"] == [], pod["security"]
    else:
        assert pod["security"]["not_applied"] == [
            "fsGroup ownership of volumes not applied: only root can give files away"
        ]


@ROOT_ONLY
def test_fs_group_owns_what_the_pod_writes_to_its_volume(home: Path) -> None:
    """The docs' demo: "The output shows that testfile has group ID 2000, which is the value of fsGroup"
    (the kubelet gives the volume to fsGroup, setgid)."""
    rc, report, out = simulate(home, [DEMO])
    assert rc == 0, out
    assert seen(pods(report)["security-context-demo-0"]).get("FILE_GROUP") == "2000", pods(report)[
        "security-context-demo-0"
    ]


# --- 2. capabilities --------------------------------------------------------------------------------------------

CAP_JOBS = {
    "caps-default": ({}, None),
    "caps-drop-all": ({"capabilities": {"drop": ["ALL"]}}, None),
    "caps-net-admin": ({"capabilities": {"add": ["NET_ADMIN"]}}, None),
    "caps-no-escalation": ({"allowPrivilegeEscalation": False}, None),
    "caps-non-root": ({}, {"runAsUser": 1000}),
}


@pytest.fixture(scope="module", params=[True, False], ids=["root", "unprivileged"])
def caps_report(request: pytest.FixtureRequest) -> Iterator[dict[str, dict[str, Any]]]:
    """One simulation of every capability case, a Job each, as root and as uid 65534 (the same sets, held in the
    pod's user namespace either way)."""
    folder = unprivileged.scratch_home()
    try:
        rc, report, out = simulate(
            folder,
            [job(name, CAPS, sc=sc or None, pod_sc=pod_sc) for name, (sc, pod_sc) in CAP_JOBS.items()],
            as_root=request.param,
        )
        assert rc == 0, out
        yield {name: pods(report)[f"{name}-0"] for name in CAP_JOBS}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def caps_of(pod: dict[str, Any]) -> tuple[int, int, str]:
    """(CapEff, CapBnd, NoNewPrivs) from /proc/$$/status, as the pod printed it."""
    lines = dict(
        line.split("=", 1) for line in pod["stderr_tail"] if line.startswith(("CapEff=", "CapBnd=", "NoNewPrivs="))
    )
    return int(lines["CapEff"], 16), int(lines["CapBnd"], 16), lines["NoNewPrivs"]


def test_a_root_container_holds_containerds_default_capabilities(caps_report: dict[str, dict[str, Any]]) -> None:
    eff, bnd, nnp = caps_of(caps_report["caps-default"])
    assert (eff, bnd, nnp) == (DEFAULT_CAPS, DEFAULT_CAPS, "0"), f"{eff:016x} {bnd:016x} {nnp}"
    assert len(caps_report["caps-default"]["security"]["capabilities"]) == 14


def test_drop_all_leaves_no_capability(caps_report: dict[str, dict[str, Any]]) -> None:
    eff, bnd, _ = caps_of(caps_report["caps-drop-all"])
    assert (eff, bnd) == (0, 0), f"{eff:016x} {bnd:016x}"
    assert caps_report["caps-drop-all"]["security"]["capabilities"] == []


def test_add_net_admin_sets_bit_12(caps_report: dict[str, dict[str, Any]]) -> None:
    eff, bnd, _ = caps_of(caps_report["caps-net-admin"])
    assert eff == bnd == DEFAULT_CAPS | 1 << NET_ADMIN, f"{eff:016x}"
    assert "NET_ADMIN" in caps_report["caps-net-admin"]["security"]["capabilities"]


def test_allow_privilege_escalation_false_sets_no_new_privs(caps_report: dict[str, dict[str, Any]]) -> None:
    eff, _, nnp = caps_of(caps_report["caps-no-escalation"])
    assert (nnp, eff) == ("1", DEFAULT_CAPS)
    assert caps_report["caps-no-escalation"]["security"]["no_new_privs"] is True


def test_a_non_root_user_holds_no_capability_but_keeps_the_bounding_set(caps_report: dict[str, dict[str, Any]]) -> None:
    eff, bnd, nnp = caps_of(caps_report["caps-non-root"])
    assert (eff, bnd, nnp) == (0, DEFAULT_CAPS, "0"), f"{eff:016x} {bnd:016x}"
    assert caps_report["caps-non-root"]["security"]["uid"] == 1000


# --- 3. the filesystem ------------------------------------------------------------------------------------------

WRITES = (
    'w() { if ( : > "$2" ) 2>/dev/null; then echo "$1=yes" >&2; else echo "$1=no" >&2; fi; }; '
    "w ROOT_W /x; w TMP_W /tmp/x; w USR_W /usr/jaxinfra-canary-$(hostname)"
)


@MODES
def test_read_only_root_filesystem(home: Path, as_root: bool) -> None:
    """readOnlyRootFilesystem: nothing is writable, /tmp neither (as on a cluster), but an emptyDir mounted there is."""
    ro = {"readOnlyRootFilesystem": True}
    rc, report, out = simulate(
        home,
        [
            job("ro", WRITES, sc=ro),
            job(
                "ro-tmp",
                WRITES,
                sc=ro,
                volumes=[{"name": "tmp", "emptyDir": {}}],
                mounts=[{"name": "tmp", "mountPath": "/tmp"}],
            ),
            job("rw", WRITES),
        ],
        as_root=as_root,
    )
    assert rc == 0, out
    got = {name: seen(pod) for name, pod in pods(report).items()}
    assert (got["ro-0"]["ROOT_W"], got["ro-0"]["TMP_W"], got["ro-0"]["USR_W"]) == ("no", "no", "no"), got
    assert (got["ro-tmp-0"]["ROOT_W"], got["ro-tmp-0"]["TMP_W"], got["ro-tmp-0"]["USR_W"]) == ("no", "yes", "no"), got
    assert (got["rw-0"]["ROOT_W"], got["rw-0"]["TMP_W"]) == ("yes", "yes"), got  # the control: the same writes do work
    if as_root:
        assert got["rw-0"]["USR_W"] == "yes", got
    assert pods(report)["ro-0"]["security"]["read_only_root_filesystem"] is True
    assert list(Path("/usr").glob("jaxinfra-canary-*")) == []


@MODES
def test_writes_land_in_the_pods_own_layer_never_on_the_machine(home: Path, canary: Path, as_root: bool) -> None:
    """A root container may rewrite and delete the machine's files it sees (copy-on-write): the machine's stay as they
    were."""
    usr = f"/usr/jaxinfra-canary-{secrets.token_hex(4)}"
    script = (
        f"C={canary}; rm -f $C/a && echo RM=done >&2; [ -e $C/a ] && echo A=present >&2 || echo A=gone >&2; "
        f'echo pod > $C/b && echo B="$(cat $C/b)" >&2; echo new > $C/c && echo C=written >&2; '
        f'touch {usr} && echo USR=written >&2; ls $C | tr "\\n" " " | sed "s/^/LS=/" >&2'
    )
    before = tree_snapshot(canary, folders=True)
    rc, report, out = simulate(home, [job("cow", script)], as_root=as_root)
    got = seen(pods(report)["cow-0"])
    assert rc == 0, out
    assert (got.get("RM"), got.get("A"), got.get("B"), got.get("C")) == ("done", "gone", "pod", "written"), got
    assert got["LS"].split() == ["b", "c"], got  # the pod saw its own changes ...
    assert tree_snapshot(canary, folders=True) == before  # ... the machine none of them
    assert not Path(usr).exists()
    if as_root:
        assert got.get("USR") == "written", got


@ROOT_ONLY
def test_a_pip_install_lands_in_the_pod_not_in_site_packages(home: Path) -> None:
    name = f"jaxinfra_canary_{secrets.token_hex(4)}"
    code = (
        f"import site, os; p = os.path.join(site.getsitepackages()[0], '{name}.py'); open(p, 'w').write('x = 1'); "
        f"import {name}; print('SITE=' + p + ' ' + str({name}.x), file=__import__('sys').stderr)"
    )
    rc, report, out = simulate(home, [job("pip", f'python3 -c "{code}"')])
    real = Path(site.getsitepackages()[0]) / f"{name}.py"
    assert seen(pods(report)["pip-0"]).get("SITE") == f"{real} 1", (out, pods(report)["pip-0"])
    assert rc == 0 and not real.exists()


SECRETS_SCRIPT = (
    "echo SHADOW_BYTES=$(cat /etc/shadow 2>/dev/null | wc -c) >&2; "
    'echo SHADOW_HEAD="$(head -n1 /etc/shadow 2>/dev/null)" >&2; '
    "echo GSHADOW_BYTES=$(cat /etc/gshadow 2>/dev/null | wc -c) >&2; "
    'echo ROOT_LS="$(ls -A /root | tr "\\n" " ")" >&2; '
    'echo HOME_LS="$(ls -A "$CALLER_HOME" 2>/dev/null | tr "\\n" " ")" >&2; '
    'echo SCRATCH_LS="$(ls -A "$SCRATCH" 2>/dev/null | tr "\\n" " ")" >&2; '
    'echo OTHER_LS="$(ls -A "$OTHER" 2>/dev/null | tr "\\n" " ")" >&2; '
    'echo TMP_LS="$(ls -A /tmp | tr "\\n" " ")" >&2'
)


def python_entries(folder: str) -> set[str]:
    """The entries of `folder` on the way to this Python (put back in pods, which run it): all a pod may see there
    (a clone under /tmp, as CI may make, has its venv put back there)."""
    out = set()
    for path in (sys.prefix, sys.base_prefix, os.path.realpath(sys.executable)):
        if path.startswith(folder.rstrip("/") + "/"):
            out.add(Path(path).relative_to(folder).parts[0])
    return out


@MODES
def test_secrets_homes_and_the_simulators_scratch_are_not_seen(as_root: bool, root_canary: Path) -> None:
    """/etc/shadow is blanked, /root and the caller's $HOME show none of the machine's files, and the simulator's
    scratch folder (its TMPDIR: every pod's token, the API server's CA key) is empty in the pod. HOME and TMPDIR
    are put outside /tmp here, so that they are hidden as themselves, not as part of /tmp."""
    base = Path(f"/srv/jaxinfra-caller-{secrets.token_hex(4)}")
    try:
        (base / "home").mkdir(parents=True)
        (base / "home" / ".bashrc").write_text("# the caller's own\n")
        (base / "scratch").mkdir()
        (base / "other").mkdir()  # a folder beside them, outside the system folders: not in the pod either
        (base / "other" / "file").write_text("anyone's\n")
        owned(base)
        env = {"HOME": str(base / "home"), "TMPDIR": str(base / "scratch")}
        sa = {"CALLER_HOME": str(base / "home"), "SCRATCH": str(base / "scratch"), "OTHER": str(base / "other")}
        rc, report, out = simulate(base / "scratch", [job("secrets", SECRETS_SCRIPT, env=sa)], as_root=as_root, env=env)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    pod = pods(report)["secrets-0"]
    got = seen(pod)
    assert rc == 0 and got["OTHER_LS"] == "", (out, got)
    assert (got["SHADOW_BYTES"], got["SHADOW_HEAD"], got["GSHADOW_BYTES"]) == ("0", "", "0"), got
    if os.access("/etc/shadow", os.R_OK):
        real = Path("/etc/shadow").read_text().splitlines()[:1]
        assert not real or real[0] not in "\n".join(pod["stderr_tail"])
    assert root_canary.name not in got["ROOT_LS"] and set(got["ROOT_LS"].split()) <= python_entries("/root"), got
    assert got["HOME_LS"] == "" and got["SCRATCH_LS"] == "" and set(got["TMP_LS"].split()) <= python_entries("/tmp"), (
        got
    )


PROC_SCRIPT = (
    'echo PIDS="$(ls /proc | grep "^[0-9]" | tr "\\n" " ")" >&2; '
    'echo CMDLINE="$(tr "\\0" " " < /proc/1/cmdline)" >&2; echo PPID=$PPID >&2; echo ME=$$$$ >&2'
)


def test_proc_shows_only_the_pods_own_processes(home: Path) -> None:
    rc, report, out = simulate(home, [job("proc", PROC_SCRIPT)])
    pod = pods(report)["proc-0"]
    got = seen(pod)
    assert rc == 0, out
    pids = [int(p) for p in got["PIDS"].split()]
    assert 1 in pids and len(pids) < 10 and max(pids) < 100, got  # the shell (PID 1) and its children; no machine pid
    assert (got["ME"], got["PPID"]) == ("1", "0"), got  # PID 1, its parent outside its PID namespace
    assert got["CMDLINE"].startswith("sh -c echo PIDS="), got


# --- 4. the image folder ----------------------------------------------------------------------------------------


def image_folder(home: Path, canary: Path | None = None) -> Path:
    """What stands in for registry.example/app:1: its files, a symlink out to the machine's /etc/hostname, one
    climbing up to /etc, one up to /root, and its app/ with a script."""
    image = home / "image"
    (image / "app").mkdir(parents=True)
    (image / "train.py").write_text("print('train')\n")
    (image / "README").write_text("the image's readme\n")
    (image / "app" / "run.sh").write_text(
        "echo RUN=ok >&2; echo PWD=$(pwd) >&2; echo changed > /app/run.sh && echo APP_W=yes >&2\n"
    )
    (image / "escape").symlink_to("/etc/hostname")
    (image / "up").symlink_to("../../../../etc")
    (image / "rootlink").symlink_to("../../../../../../../../root")
    if canary is not None:
        (image / "through").symlink_to(canary / "b")
    return owned(image)


IMAGE_SCRIPT = (
    "echo changed > /train.py; rm -f /README; echo pod > /through; "
    'echo ESCAPE="$(cat /escape)" >&2; echo UP="$(ls /up | grep -c .)" >&2; '
    'echo PASSWD="$(ls /up/passwd)" >&2; echo ROOTLINK="$(ls -A /rootlink | tr "\\n" " ")" >&2; '
    'echo THROUGH="$(cat /through)" >&2; echo TRAIN="$(cat /train.py)" >&2'
)


@MODES
def test_the_image_folder_is_never_written(home: Path, canary: Path, root_canary: Path, as_root: bool) -> None:
    """The pod rewrites and deletes its image's files and writes through its symlinks: DIR and what its links point
    to on the machine stay as they were; a link resolves inside the container (/root there is empty)."""
    image = image_folder(home, canary)
    before, hostname, canary_before = (
        tree_snapshot(image, folders=True),
        Path("/etc/hostname").read_bytes(),
        tree_snapshot(canary, folders=True),
    )
    rc, report, out = simulate(
        home, [job("img", IMAGE_SCRIPT, image=APP_IMAGE)], "--image", f"{APP_IMAGE}={image}", as_root=as_root
    )
    got = seen(pods(report)["img-0"])
    assert rc == 0, out
    assert (
        tree_snapshot(image, folders=True) == before
        and tree_snapshot(canary, folders=True) == canary_before
        and Path("/etc/hostname").read_bytes() == hostname
    )
    assert got["ESCAPE"] == hostname.decode().strip() and got["PASSWD"] == "/up/passwd" and int(got["UP"]) > 5, got
    assert root_canary.name not in got["ROOTLINK"] and set(got["ROOTLINK"].split()) <= python_entries("/root"), got
    assert got["THROUGH"] == "pod", got  # written in the pod's layer, through the image's link


@ROOT_ONLY
def test_a_root_container_may_rewrite_its_images_files(home: Path) -> None:
    """On a cluster the image's layers are under an overlay: a root container can change /train.py and delete
    /README (the change is its own). Same here: DIR is the image's top layer, copy-on-write."""
    image = image_folder(home)
    rc, report, out = simulate(
        home,
        [
            job(
                "img",
                IMAGE_SCRIPT + "; [ -e /README ] && echo README=kept >&2 || echo README=gone >&2",
                image=APP_IMAGE,
            )
        ],
        "--image",
        f"{APP_IMAGE}={image}",
    )
    pod = pods(report)["img-0"]
    got = seen(pod)
    assert rc == 0, out
    assert (got["TRAIN"], got["README"]) == ("changed", "gone"), pod["stderr_tail"]


@MODES
def test_working_dir_in_the_image(home: Path, as_root: bool) -> None:
    image = image_folder(home)
    before = tree_snapshot(image, folders=True)
    rc, report, out = simulate(
        home,
        [job("app", "sh run.sh", image=APP_IMAGE, workingDir="/app")],
        "--image",
        f"{APP_IMAGE}={image}",
        as_root=as_root,
    )
    got = seen(pods(report)["app-0"])
    assert rc == 0 and (got["RUN"], got["PWD"]) == ("ok", "/app"), (out, got)
    if as_root:
        assert got.get("APP_W") == "yes", got
    assert tree_snapshot(image, folders=True) == before


def test_a_relative_working_dir_is_refused_as_runc_does(home: Path) -> None:
    image = image_folder(home)
    before = tree_snapshot(image, folders=True)
    rc, report, out = simulate(
        home,
        [job("rel", "echo RAN=yes >&2", image=APP_IMAGE, workingDir="../../../../etc")],
        "--image",
        f"{APP_IMAGE}={image}",
    )
    assert rc == 1, out
    [w] = report["workloads"]
    assert w["verdict"] == "failed" and w["attempts"] == [], w
    [problem] = w["problems"]
    assert "workingDir" in problem["path"] and problem["message"].startswith("RunContainerError"), problem
    assert tree_snapshot(image, folders=True) == before


# --- 5. ServiceAccount tokens -----------------------------------------------------------------------------------

SA_SCRIPT = (
    f'echo SA_LS="$(ls -A {SA_DIR} 2>/dev/null | tr "\\n" " ")" >&2; '
    'echo FOUND="$(find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -name token -path '
    '"*serviceaccount*" '
    '-print 2>/dev/null | tr "\\n" " ")" >&2; echo TMP_LS="$(ls -A /tmp | tr "\\n" " ")" >&2'
)


def test_no_token_without_automount_and_no_other_pods_token(home: Path) -> None:
    """automountServiceAccountToken: false: no token anywhere in the pod's filesystem (not its own, not the one the
    pod beside it got, which lies in the simulator's scratch folder); with it, the token is where the docs say."""
    rc, report, out = simulate(
        home, [job("sa-off", SA_SCRIPT, automountServiceAccountToken=False), job("sa-on", SA_SCRIPT)]
    )
    assert rc == 0, out
    off, on = seen(pods(report)["sa-off-0"]), seen(pods(report)["sa-on-0"])
    assert (off["SA_LS"], off["FOUND"]) == ("", "") and set(off["TMP_LS"].split()) <= python_entries("/tmp"), off
    assert sorted(on["SA_LS"].split()) == ["ca.crt", "namespace", "token"], on
    [found] = on["FOUND"].split()  # find does not follow /var/run, a link to /run
    assert found in (f"{SA_DIR}/token", f"{SA_DIR.removeprefix('/var')}/token"), on
    assert set(on["TMP_LS"].split()) <= python_entries("/tmp"), on


# --- 6. memory limits -------------------------------------------------------------------------------------------

ALLOCATE = 'python3 -c "b = bytearray(512 * 1024 * 1024); print(len(b))"'


@MODES
def test_a_memory_limit_is_a_limit(home: Path, as_root: bool) -> None:
    small = job("oom", ALLOCATE, resources={"limits": {"memory": "64Mi"}})
    big = job("fits", ALLOCATE, resources={"limits": {"memory": "1Gi"}})
    rc, report, out = simulate(home, [small, big], as_root=as_root)
    got = pods(report)
    unenforced = [n for n in report["notes"] if "memory limits not enforced" in n]
    assert got["fits-0"]["exit_code"] == 0, got["fits-0"]
    if not as_root:
        assert unenforced, report["notes"]
        assert rc == 0 and got["oom-0"]["exit_code"] == 0, out  # not enforced: the program runs as it would unlimited
        return
    if unenforced:
        pytest.skip(f"this machine does not let root enforce memory limits: {unenforced}")
    assert rc == 1 and got["oom-0"]["exit_code"] == 137 and got["oom-0"]["reason"].startswith("OOMKilled"), got["oom-0"]
    assert got["oom-0"]["limits"]["memory"] == 64 * 1024 * 1024 and got["oom-0"]["limits"]["enforced"] is True


# --- 7. the network ---------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def host_listeners(port: int) -> list[str]:
    """LISTEN entries for `port` in this machine's (the test's) network namespace."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.append(line)
    return found


def listener(port: int, seconds: float) -> dict[str, Any]:
    return job(
        "net",
        f'python3 -c "import socket, sys, time; s = socket.socket(); '
        f"s.bind(('0.0.0.0', {port})); s.listen(); "
        f"print('LISTENING', flush=True); print('BOUND={port}', file=sys.stderr); time.sleep({seconds})\"",
    )


def run_until(
    home: Path, jobs: list[dict[str, Any]], line: str, as_root: bool, check: Any
) -> tuple[int, dict[str, Any], str]:
    """Run the simulation with its logs; once a pod prints `line` (polled up to 10 s), call `check()`; then let it
    end."""
    manifest, report = home / "job.yaml", home / "report.json"
    manifest.write_text(dump(jobs), encoding="utf-8")
    argv, env, save = unprivileged.command(sim_argv(manifest, report, logs=True), home, as_root=as_root)
    proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, found = "", False
    try:
        deadline = time.monotonic() + 10
        assert proc.stdout is not None
        while not found and time.monotonic() < deadline:
            if select.select([proc.stdout], [], [], 0.1)[0]:
                text = proc.stdout.readline()
                if not text:
                    break
                out += text
                found = line in text
        assert found, out
        check()
        rest, _ = proc.communicate(timeout=30)
        out += rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if save is not None:
            shutil.rmtree(save, ignore_errors=True)
    assert "Traceback" not in out, out
    return proc.returncode, json.loads(report.read_text()), out


@MODES
def test_a_pods_listener_is_not_on_the_machine(home: Path, as_root: bool) -> None:
    port = free_port()

    def check() -> None:  # while the pod listens on 0.0.0.0:port in the pod network
        with socket.socket() as probe:
            probe.settimeout(1)
            assert probe.connect_ex(("127.0.0.1", port)) != 0, "the pod's port is open on the machine"
        assert host_listeners(port) == []

    rc, report, out = run_until(home, [listener(port, 3)], "[net-0] LISTENING", as_root, check)
    assert rc == 0 and pods(report)["net-0"]["exit_code"] == 0, out


@MODES
def test_a_machines_listener_does_not_take_a_pods_port(home: Path, as_root: bool) -> None:
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        rc, report, out = simulate(home, [listener(port, 0)], as_root=as_root)
        assert host_listeners(port), "the machine's listener is still there"
    pod = pods(report)["net-0"]
    assert rc == 0 and pod["exit_code"] == 0 and seen(pod).get("BOUND") == str(port), (out, pod)
