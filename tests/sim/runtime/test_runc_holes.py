"""runc's known holes, closed around whatever runc this machine has (simulate/jaxinfra_sim/runtime/runc.py, rootfs.py,
sandbox.py; node/runc_advisories.py): as root and as uid 65534, the machine checked unchanged afterwards.

- A container's capabilities never reach the user namespace runc runs in: a privileged container that tries to
  ptrace every runc process joining it (an exec probe each second) is refused, and copies none of its descriptors
  (opencontainers/runc nsexec.c makes those processes non-dumpable; the kernel's ptrace_may_access then asks for
  CAP_SYS_PTRACE over the namespace runc was started in, which only a container of its own gives).
- runc's masked paths keep their source: no container can swap another's `/dev/null` (CVE-2025-31133). A volume
  at or over what a runc before 1.2.8/1.3.3 trusts (`/dev`, `/dev/null`, `/dev/pts`, a masked path) is refused
  before anything starts, as the machine's limit (exit 3), naming runc's version and the fix; one that a symlink in
  another container's volume brings there is refused at its start. `/dev/shm` (an emptyDir of medium Memory, as JAX
  jobs have) works.

Manifests in the style of the Kubernetes docs' (busybox, an Indexed Job); each container prints KEY=value lines on
stderr (`seen`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jaxinfra.yamlio import dump
from jaxinfra_sim.core import model
from jaxinfra_sim.core.errors import Unavailable
from jaxinfra_sim.node import parts, runc_advisories
from jaxinfra_sim.runtime import root_paths, runc
from tests.sim.runtime.test_sandbox import MODES, job, pods, seen, sim_argv, simulate
from tests.support import unprivileged

pytestmark = pytest.mark.simulator

CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")
#: What each run of a container prints of runc's masks: the file type and device numbers of two masked paths (the
#: null device, 1:3, where masked) and whether it reads anything there.
MASKS = (
    'echo KEYS="$(stat -c %F:%t:%T /proc/keys):$(wc -c < /proc/keys)" >&2; '
    'echo TIMERS="$(stat -c %F:%t:%T /proc/timer_list):$(wc -c < /proc/timer_list)" >&2; '
)
MASKED = "character special file:1:3:0"

#: A privileged container's program: for 5 s, every process of its PID namespace named runc:* (runc's init joining
#: it: `runc exec` for a probe) is PTRACE_SEIZEd and its first descriptors copied with pidfd_getfd(2).
PTRACE = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
SEIZE, INTERRUPT, DETACH, GETFD, WALL = 0x4206, 0x4207, 17, 438, 0x40000000
me, tried, attached, refused, copied = os.getpid(), 0, 0, 0, 0
def runc(pid):
    try:
        return "runc" in os.readlink("/proc/%d/exe" % pid)
    except OSError:
        return False
end = time.time() + 5
while time.time() < end:
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (me, 1):
            continue
        pid = int(name)
        try:
            comm = open("/proc/%d/comm" % pid).read().strip()
        except OSError:
            continue
        if not comm.startswith("runc"):
            continue
        tried += 1
        seized = libc.ptrace(SEIZE, pid, None, None) == 0
        if not seized:
            refused += ctypes.get_errno() == 1
        else:
            libc.ptrace(INTERRUPT, pid, None, None)
            try:
                os.waitpid(pid, WALL)
            except OSError:
                pass
        try:
            handle = os.pidfd_open(pid)
        except OSError:
            handle = -1
        got = 0
        for number in range(16 if handle >= 0 else 0):
            fd = libc.syscall(GETFD, handle, number, 0)
            if fd >= 0:
                got += 1
                os.close(fd)
        if handle >= 0:
            os.close(handle)
        if runc(pid):
            attached += seized
            copied += got
        if seized:
            libc.ptrace(DETACH, pid, None, None)
print("TRIED=%d" % tried, "ATTACHED=%d" % attached, "EPERM=%d" % refused, "COPIED=%d" % copied, sep="\\n",
      file=sys.stderr)
"""


@MODES
def test_a_privileged_container_cannot_ptrace_runc_joining_it(home: Path, as_root: bool) -> None:
    """An exec probe every second; the container holds every capability and tries to seize runc's init each time
    it appears: refused (EPERM), no descriptor copied, and the probe passes."""
    probe = {"exec": {"command": ["true"]}, "periodSeconds": 1, "failureThreshold": 10}
    script = f"python3 -c '{PTRACE}'"
    rc, report, out = simulate(
        home, [job("seize", script, sc={"privileged": True}, livenessProbe=probe)], as_root=as_root
    )
    pod = pods(report)["seize-0"]
    got = seen(pod)
    assert rc == 0, (out, pod)
    assert int(got["TRIED"]) >= 1, got  # it did see runc's init
    assert (got["ATTACHED"], got["COPIED"]) == ("0", "0"), got
    assert int(got["EPERM"]) >= 1, got
    status = pod["probes"]["liveness"]
    assert status["probes"] >= 2 and status["result"] == "success", status


@MODES
def test_in_a_shared_pid_namespace_no_container_can_ptrace_runc_joining_another(home: Path, as_root: bool) -> None:
    """shareProcessNamespace: a privileged sidecar sees every process of the pod, runc's init too as it makes the
    main container (`runc create`) and as it joins it for each exec probe: it can seize none, copy none of its
    descriptors; the probes pass."""
    probe = {"exec": {"command": ["true"]}, "periodSeconds": 1, "failureThreshold": 10}
    sidecar = ["sh", "-c", f"touch /data/ready; python3 -c '{PTRACE}'"]
    pod = sidecar_pod("peer", sidecar, "sleep 6", [{"name": "shared", "sidecar": "/data"}], shareProcessNamespace=True)
    pod["spec"]["template"]["spec"]["containers"][0]["livenessProbe"] = probe
    rc, report, out = simulate(home, [pod], as_root=as_root)
    said = stderr_of(report)
    got = dict(
        line.split("=", 1) for line in said.splitlines() if line.split("=")[0] in ("TRIED", "ATTACHED", "COPIED")
    )
    assert rc == 0, (out, said)
    assert int(got["TRIED"]) >= 1 and (got["ATTACHED"], got["COPIED"]) == ("0", "0"), said


# --- runc's masked paths: their source stays runc's own --------------------------------------------------------------

#: The attacker of CVE-2025-31133: once the main container's mount path /data/x (in the emptyDir both share) is a
#: symlink to /dev, its other volume `devs` would be the main container's /dev, where runc makes the device nodes and
#: takes /dev/null for the masks; it swaps every entry there for a symlink to the machine's core_pattern, in a loop.
SWAP_DEV = """
import os, time
os.symlink("/dev", "/data/x")
open("/data/ready", "w").close()
end = time.time() + 20
while time.time() < end:
    for name in os.listdir("/devs"):
        try:
            os.symlink("/proc/sys/kernel/core_pattern", "/devs/.swap")
            os.rename("/devs/.swap", "/devs/" + name)
        except OSError:
            pass
"""


def sidecar_pod(name: str, sidecar: list[str], main: str, volumes: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    """A one-pod Indexed Job: a privileged native sidecar `swap` (started once /data/ready exists: its startup probe)
    with the emptyDirs `volumes` (name, sidecar's path, main's path), then the main container `main`."""
    swap: dict[str, Any] = {
        "name": "swap",
        "image": "busybox:1.36",
        "restartPolicy": "Always",
        "command": sidecar,
        "securityContext": {"privileged": True},
        "volumeMounts": [{"name": v["name"], "mountPath": v["sidecar"]} for v in volumes],
        "startupProbe": {"exec": {"command": ["test", "-e", "/data/ready"]}, "periodSeconds": 1},
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "volumes": [{"name": v["name"], "emptyDir": v.get("emptyDir", {})} for v in volumes],
        "initContainers": [swap],
        "containers": [
            {
                "name": "main",
                "image": "busybox:1.36",
                "command": ["sh", "-c", main],
                "volumeMounts": [{"name": v["name"], "mountPath": v["main"]} for v in volumes if v.get("main")],
            }
        ],
        **more,
    }
    body = {"completionMode": "Indexed", "completions": 1, "backoffLimit": 0, "template": {"spec": spec}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": body}


def trusted_here() -> tuple[runc.Trusted, ...]:
    """What this machine's runc trusts (its known holes); the test is skipped where it has none."""
    found = parts.runc_trusted()
    if not found:
        pytest.skip("this machine's runc has no known hole to refuse")
    return found


def stderr_of(report: dict[str, Any]) -> str:
    return "\n".join(
        line
        for w in report.get("workloads", [])
        for a in w["attempts"]
        for p in a["pods"]
        for line in [*p.get("stderr_tail", []), *(x for c in p.get("containers", []) for x in c.get("stderr_tail", []))]
    )


@MODES
def test_a_volume_a_symlink_brings_over_dev_is_refused_at_start(home: Path, as_root: bool) -> None:
    """The sidecar turns the main container's mount path /data/x (in their shared emptyDir) into a symlink to /dev
    before the main container starts, then keeps swapping what its volume `devs` holds for symlinks to the machine's
    core_pattern. Resolved inside the root as the runtime resolves it, `devs` would land on /dev, where this runc
    takes /dev/null for its masks: the main container's start is refused, naming runc's version, the CVE and the
    fix; core_pattern is unchanged."""
    [trusted, *_] = trusted_here()
    before = CORE_PATTERN.read_text()
    volumes = [
        {"name": "shared", "sidecar": "/data", "main": "/data"},
        {"name": "devs", "sidecar": "/devs", "main": "/data/x"},
    ]
    pod = sidecar_pod("devlink", ["python3", "-c", SWAP_DEV], MASKS, volumes)
    rc, report, out = simulate(home, [pod], as_root=as_root)
    said = stderr_of(report)
    assert CORE_PATTERN.read_text() == before
    assert rc == 1 and "KEYS=" not in said, (out, said)
    assert "(mountPath /data/x) is mounted over /dev/null" in said, said
    assert f"runc {trusted.version} has" in said and "CVE-2025-31133" in said, said
    assert "upgrade runc to 1.2.8, 1.3.3 or 1.4.0" in said, said


#: A sidecar that swaps what it can reach of the main container's /dev: the shared /dev/shm's entries, each for a
#: symlink to the machine's core_pattern, in a loop.
SWAP_SHM = """
import os, time
for name in ("null", "zero", "keys"):
    os.symlink("/proc/sys/kernel/core_pattern", "/dev/shm/" + name)
open("/data/ready", "w").close()
end = time.time() + 20
while time.time() < end and not os.path.exists("/data/done"):
    for name in os.listdir("/dev/shm"):
        try:
            os.symlink("/proc/sys/kernel/core_pattern", "/dev/shm/.swap")
            os.rename("/dev/shm/.swap", "/dev/shm/" + name)
        except OSError:
            pass
"""


@MODES
def test_a_shared_dev_shm_works_and_every_start_keeps_its_masks(home: Path, as_root: bool) -> None:
    """What JAX jobs do: an emptyDir of medium Memory at /dev/shm, shared by two containers. The sidecar swaps its
    entries for symlinks to the machine's core_pattern throughout; the main container fails once and is restarted in
    place (restartPolicy OnFailure), and each start sees /proc/keys and /proc/timer_list masked by the null device,
    empty, and the sidecar's file in /dev/shm; core_pattern is unchanged, and the Job succeeds."""
    before = CORE_PATTERN.read_text()
    main = (
        MASKS + 'echo SHM="$(ls /dev/shm | sort | tr "\\n" " ")" >&2; '
        "if [ ! -e /data/again ]; then touch /data/again; exit 1; fi; touch /data/done"
    )
    volumes: list[dict[str, Any]] = [
        {"name": "shared", "sidecar": "/data", "main": "/data"},
        {"name": "shm", "sidecar": "/dev/shm", "main": "/dev/shm", "emptyDir": {"medium": "Memory"}},
    ]
    pod = sidecar_pod("shm", ["python3", "-c", SWAP_SHM], main, volumes)
    pod["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    pod["spec"]["backoffLimit"] = 2
    rc, report, out = simulate(home, [pod], as_root=as_root)
    said = stderr_of(report)
    assert CORE_PATTERN.read_text() == before
    assert rc == 0, (out, said)
    runs = [line for line in said.splitlines() if line.startswith("KEYS=")]
    assert len(runs) >= 2 and set(runs) == {f"KEYS={MASKED}"}, said  # each start, the restart's too
    assert f"TIMERS={MASKED}" in said and "keys null zero" in said, said


@MODES
@pytest.mark.parametrize(
    ("path", "covers"),
    [("/dev", "over /dev/null"), ("/dev/null", "at /dev/null"), ("/sys/firmware", "at /sys/firmware"), ("/", "over")],
)
def test_a_volume_at_or_over_what_runc_trusts_is_refused_before_anything_starts(
    home: Path, as_root: bool, path: str, covers: str
) -> None:
    """Two containers share an emptyDir mounted at `path` in one of them: with this machine's runc, the other could
    swap what runc takes from there for the masks. Refused before anything starts: exit 3, this machine's limit (not
    the job's), with runc's version, the CVEs and the release that fixes them."""
    [trusted, *_] = trusted_here()
    volumes = [{"name": "shared", "sidecar": "/data", "main": path}]
    manifest, report = home / "job.yaml", home / "report.json"
    manifest.write_text(dump([sidecar_pod("trusted", ["sh", "-c", "touch /data/ready; sleep 30"], "true", volumes)]))
    r = unprivileged.run(sim_argv(manifest, report), home, as_root=as_root, capture_output=True, text=True, timeout=90)
    rc, out = r.returncode, r.stdout + r.stderr
    assert rc == 3 and "Traceback" not in out, out
    assert f"container main volume shared is mounted {covers}" in out, out
    assert f"this machine's runc {trusted.version} has CVE-2025-31133" in out, out
    assert "fix: upgrade runc to 1.2.8, 1.3.3 or 1.4.0 (or later in the same line)" in out, out


# --- the rules, without a process ------------------------------------------------------------------------------------

DEBIAN = ("1.1.5+ds1 (package 1.1.5+ds1-1+deb12u1)", ("CVE-2024-21626",))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("version", "path", "refused"),
    [
        (DEBIAN, "/dev", "mounted over /dev/null"),
        (DEBIAN, "/dev/", "mounted over /dev/null"),
        (DEBIAN, "/dev/null", "mounted at /dev/null"),
        (DEBIAN, "/dev/pts", "mounted at /dev/pts"),
        (DEBIAN, "/dev/console", "mounted at /dev/console"),
        (DEBIAN, "/proc", "mounted over /proc/acpi"),
        (DEBIAN, "/proc/keys", "mounted at /proc/keys"),
        (DEBIAN, "/sys/devices/virtual", "mounted over /sys/devices/virtual/powercap"),
        (DEBIAN, "/", "mounted over /dev/null"),
        (DEBIAN, "/dev/shm", None),
        (DEBIAN, "/dev/pts/0", None),
        (DEBIAN, "/data", None),
        (DEBIAN, "/devices", None),
        (("1.2.7", ()), "/dev", "mounted over /dev/null"),
        (("1.2.8", ()), "/dev", None),
        (("1.3.2", ()), "/dev/null", "mounted at /dev/null"),
        (("1.3.3", ()), "/dev/null", None),
        (("1.4.0-rc.2", ()), "/dev", "mounted over /dev/null"),
        (("1.4.0", ()), "/dev", None),
        (("1.1.5", ("CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881")), "/dev", None),  # a backport of all three
    ],
)
def test_which_mount_paths_a_runc_trusts(version: tuple[str, tuple[str, ...]], path: str, refused: str | None) -> None:
    why = runc.refusal(runc_advisories.trusted(*version), "pod p-0 container main volume v", path)
    if refused is None:
        assert why is None, why
        return
    assert why is not None
    cause, fix = why
    assert cause.startswith(
        f"pod p-0 container main volume v is {refused}, and this machine's runc {version[0]} has"
    ), cause
    assert "CVE-2025-31133" in cause and "CVE-2024-21626" not in cause, cause
    assert fix == "upgrade runc to 1.2.8, 1.3.3 or 1.4.0 (or later in the same line), or mount the volume elsewhere"


@pytest.mark.unit
def test_a_hostpath_of_the_nodes_sys_is_the_containers_own_view_and_never_refused() -> None:
    """xpk's GPUDirect daemons mount a hostPath of /sys over the container's /sys: the container's own sysfs,
    read-only (`kubelet.volume_manager.kernel_views`), where nothing can be swapped; a volume of the pod's own there
    is refused on a runc that masks /sys/firmware as it finds it."""
    trusted = runc_advisories.trusted("1.1.5+ds1", ())

    def pod(kind: str, key: str) -> model.Pod:
        mount = model.Mount("sys", "/sys", kind=kind, key=key)
        return model.Pod(
            "Job/default/s", "default", "s-0", "s-0", None, "10.244.0.2", 0, 0, 0, {}, {}, "main", "busybox:1.28",
            (), (), {}, None, 1, "cpu", mounts=(mount,),
        )  # fmt: skip

    runc.refuse_holes([pod("hostPath", "/sys"), pod("hostPath", "/proc/sys/../../sys")], trusted)
    with pytest.raises(Unavailable, match="volume sys is mounted over /sys/firmware"):
        runc.refuse_holes([pod("emptyDir", "")], trusted)
    with pytest.raises(Unavailable, match="mounted over /sys/firmware"):
        runc.refuse_holes([pod("hostPath", "/data")], trusted)


@pytest.mark.unit
def test_a_containers_user_namespace_nests_in_its_shims_each_id_as_itself(tmp_path: Path) -> None:
    """Unprivileged, the shim's namespace maps the caller and its subordinate ids; the container's, nested in it,
    maps each of those ids as itself: its ids (and its files' owners) are the shim's, its capabilities are not."""
    (tmp_path / "uid_map").write_text("         0       1000          1\n         1     100000      65536\n")
    assert runc.nested_ids("uid_map", tmp_path) == [
        {"containerID": 0, "hostID": 0, "size": 1},
        {"containerID": 1, "hostID": 1, "size": 65536},
    ]


# --- mount points inside a root: by descriptor, never out of it ------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    folder = tmp_path / "root"
    (folder / "data").mkdir(parents=True)
    (folder / "dev").mkdir()
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    yield folder, fd
    os.close(fd)


def opened(root: int, path: str, make: str = "") -> str:
    found = root_paths.open_in(root, path, make)
    try:
        return found.path
    finally:
        found.close()


@pytest.mark.unit
def test_a_mount_point_resolves_inside_the_root_as_the_container_resolves_it(
    root: tuple[Path, int], tmp_path: Path
) -> None:
    """A symlink (absolute or relative) and `..` lead at most to the root's own folders, never the machine's."""
    folder, fd = root
    (folder / "data" / "x").symlink_to("/dev")
    (folder / "data" / "up").symlink_to("../../../../..")
    (folder / "data" / "out").symlink_to(str(tmp_path))
    assert opened(fd, "data/x") == "/dev"
    assert opened(fd, "data/up/dev") == "/dev"
    assert opened(fd, "/../../data/../dev") == "/dev"
    with pytest.raises(FileNotFoundError):  # the machine's tmp_path is not inside the root
        opened(fd, "data/out/root")


@pytest.mark.unit
def test_what_is_missing_is_made_inside_the_root_only(root: tuple[Path, int], tmp_path: Path) -> None:
    folder, fd = root
    outside = tmp_path / "outside"
    outside.mkdir()
    (folder / "data" / "away").symlink_to(str(outside))
    assert opened(fd, "data/away/new/file", make="file") == str(outside).rstrip("/") + "/new/file"
    assert (folder / outside.relative_to("/") / "new" / "file").is_file()  # made beneath the root
    assert list(outside.iterdir()) == []  # the machine's folder is untouched
    (folder / "loop").symlink_to("loop")
    with pytest.raises(OSError) as err:
        opened(fd, "loop/x")
    assert err.value.errno == errno.ELOOP
