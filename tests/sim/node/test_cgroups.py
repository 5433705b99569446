"""Pod limits enforced by the kernel (simulate/cgroups.py): for real where this machine lets the suite make
groups (root on a cgroup v1 or delegated v2 host), against a fake cgroup tree for both versions' logic, and
as an unprivileged user, who gets a plain reason instead of an error."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from jaxinfra_sim.core.paths import safe_name
from jaxinfra_sim.node import capacity, cgroupfs, cgroups
from jaxinfra_sim.node.cgroupfs import Controller, Controllers
from jaxinfra_sim.node.cgroups import Session
from tests.support import unprivileged
from tests.support.paths import ROOT

pytestmark = pytest.mark.simulator

MiB = 2**20


# --- for real ------------------------------------------------------------------------------------


@pytest.fixture
def real() -> Controllers:
    if os.geteuid() != 0:
        pytest.skip("making cgroups needs root here (or a delegated cgroup v2 group)")
    found = cgroupfs.probe()
    if found.memory is None:
        pytest.skip(f"no usable memory controller: {found.memory_reason}")
    return found


def run_in(group: cgroups.PodGroup | None, allocate: int) -> int:
    """Fork a child that enters `group`, then touches `allocate` bytes: its wait status."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            if group is not None:
                group.enter()
            data = bytearray(b"\x01") * allocate  # written, so charged (a calloc'd bytearray would not be)
            code = 0 if data[-1] == 1 else 1
        except BaseException:
            code = 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return status


def test_a_pod_over_its_memory_limit_is_oom_killed_and_one_under_it_is_not(real: Controllers) -> None:
    with Session.create("test-oom") as session:
        over = session.pod("default/over-0", 64 * MiB, None)
        under = session.pod("default/under-0", 64 * MiB, 500)
        assert over is not None and under is not None
        made = [*over.paths, *under.paths, *session.groups.values()]
        assert all(p.is_dir() for p in made)

        status = run_in(over, 200 * MiB)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
        assert over.oom_killed()
        assert over.memory_bytes == 64 * MiB and (over.peak_bytes() or 0) >= 60 * MiB

        status = run_in(under, 8 * MiB)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        assert not under.oom_killed()
        if real.cpu is not None:
            assert under.cpu_millis == 500
            cpu_group = next(p for p in under.paths if p.is_relative_to(real.cpu.group))
            if real.cpu.version == 1:
                assert (cpu_group / "cpu.cfs_quota_us").read_text().strip() == "50000"
            else:
                assert (cpu_group / "cpu.max").read_text().split() == ["50000", "100000"]

    assert not any(p.exists() for p in made)
    session.close()  # idempotent


def test_close_kills_what_is_left_in_the_groups(real: Controllers) -> None:
    session = Session.create("test-leftover")
    group = session.pod("default/sleeper-0", 256 * MiB, None)
    assert group is not None
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], preexec_fn=group.enter)
    try:
        session.close()
        assert child.wait(timeout=10) == -signal.SIGKILL
        assert session.closed and not any(p.exists() for p in (*group.paths, *session.groups.values()))
    finally:
        child.kill()
        child.wait()


def test_a_pod_without_limits_gets_no_group(real: Controllers) -> None:
    with Session.create("test-nolimit") as session:
        assert session.pod("default/free-0", None, None) is None
        assert [e for g in session.groups.values() for e in os.scandir(g) if e.is_dir()] == []


# --- unprivileged --------------------------------------------------------------------------------

PROBE = """
import json, os
from jaxinfra_sim.node import cgroupfs, cgroups
found = cgroupfs.probe()
with cgroups.Session.create("nonroot") as s:
    pod = s.pod("default/p-0", 64 << 20, 1000)
print(json.dumps({"uid": os.geteuid(), "lines": found.unenforced(), "memory": found.memory is not None,
                  "pod": pod is not None, "groups": [str(g) for g in s.groups.values()]}))
"""


def test_an_unprivileged_user_is_told_why_limits_are_not_enforced() -> None:
    home = unprivileged.scratch_home()
    try:
        r = unprivileged.run([sys.executable, "-c", PROBE], home, cwd=ROOT, capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    out = json.loads(r.stdout)
    if out["uid"] == 0 or out["memory"]:
        pytest.skip("this machine delegates a memory cgroup to the unprivileged user")
    assert not out["pod"] and out["groups"] == []
    [memory, *_] = out["lines"]
    assert memory.startswith("memory limits not enforced: cgroup v"), memory
    if os.geteuid() == 0 and Path("/sys/fs/cgroup/memory").is_dir():  # this machine: v1, nothing delegated
        assert memory.endswith(f": not writable by uid {unprivileged.NOBODY} (no delegation)"), memory


# --- a fake tree: the kernel's side, as files ----------------------------------------------------


class FakeKernel:
    """What the kernel does on mkdir, rmdir and writes to cgroup.subtree_control, for a cgroup tree of plain files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.writes: list[tuple[Path, str]] = []

    def v1_files(self, path: Path) -> dict[str, str]:
        hierarchy = path.relative_to(self.root).parts[0]
        files = {"cgroup.procs": "", "tasks": ""}
        if "memory" in hierarchy.split(","):
            files |= {
                "memory.limit_in_bytes": "9223372036854771712\n",
                "memory.memsw.limit_in_bytes": "9223372036854771712\n",
                "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
                "memory.max_usage_in_bytes": "0\n",
            }
        if "cpu" in hierarchy.split(","):
            files |= {"cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "-1\n"}
        if "pids" in hierarchy.split(","):
            files |= {"pids.max": "max\n", "pids.current": "0\n", "pids.peak": "0\n"}
        return files

    def v2_files(self, path: Path) -> dict[str, str]:
        enabled = (path.parent / "cgroup.subtree_control").read_text().split()
        files = {
            "cgroup.procs": "",
            "cgroup.controllers": " ".join(enabled),
            "cgroup.subtree_control": "",
            "cgroup.kill": "",
        }
        if "memory" in enabled:
            files |= {
                "memory.max": "max\n",
                "memory.swap.max": "max\n",
                "memory.oom.group": "0\n",
                "memory.peak": "0\n",
                "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
            }
        if "cpu" in enabled:
            files["cpu.max"] = "max 100000\n"
        if "pids" in enabled:
            files |= {"pids.max": "max\n", "pids.current": "0\n", "pids.peak": "0\n"}
        return files

    def mkdir(self, path: Path) -> None:
        os.mkdir(path)
        v2 = (path.parent / "cgroup.controllers").exists()
        for name, text in (self.v2_files(path) if v2 else self.v1_files(path)).items():
            (path / name).write_text(text)

    def rmdir(self, path: Path) -> None:
        if not path.exists():
            raise FileNotFoundError(errno.ENOENT, "no such group", str(path))
        if any(p.is_dir() for p in path.iterdir()) or (path / "cgroup.procs").read_text().split():
            raise OSError(errno.EBUSY, "busy", str(path))
        shutil.rmtree(path)

    def write(self, path: Path, text: str) -> None:
        self.writes.append((path, text))
        if path.name == "cgroup.subtree_control":
            group = path.parent
            if group != self.root and (group / "cgroup.procs").read_text().split():
                raise OSError(errno.EBUSY, "no internal processes", str(path))
            enabled = set(path.read_text().split())
            for token in text.split():
                (enabled.add if token[0] == "+" else enabled.discard)(token[1:])
            path.write_text(" ".join(sorted(enabled)))
        elif not path.exists():
            raise PermissionError(errno.EACCES, "cannot create files in a cgroup", str(path))
        else:
            path.write_text(text)


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKernel]:
    fake = FakeKernel(tmp_path)
    monkeypatch.setattr(cgroupfs, "mkdir", fake.mkdir)
    monkeypatch.setattr(cgroupfs, "rmdir", fake.rmdir)
    monkeypatch.setattr(cgroupfs, "write", fake.write)
    yield fake
    cgroupfs.probe.cache_clear()


def v2_group(root: Path, path: str, controllers: str, enabled: str = "", procs: str = "") -> Path:
    group = root / path.lstrip("/")
    group.mkdir(parents=True, exist_ok=True)
    (group / "cgroup.controllers").write_text(controllers)
    (group / "cgroup.subtree_control").write_text(enabled)
    (group / "cgroup.procs").write_text(procs)
    return group


def test_v2_in_the_root_of_a_cgroup_namespace_enforces_both(kernel: FakeKernel) -> None:
    root = kernel.root
    v2_group(
        root, "/", "cpuset cpu io memory pids", "", "1\n7\n"
    )  # a container's own namespace: the root may have processes
    found = cgroupfs.probe(root, "0::/\n")
    assert found == Controllers(
        Controller("memory", 2, root), Controller("cpu", 2, root), pids=Controller("pids", 2, root)
    )
    assert found.unenforced() == []
    assert (root / "cgroup.subtree_control").read_text().split() == ["cpu", "memory", "pids"]
    assert [p.name for p in root.iterdir() if p.is_dir()] == []  # the trial groups are gone

    with Session.create("sim/1", found) as session:
        [group] = session.groups.values()
        assert group.name == f"jaxinfra-{os.getpid()}-{safe_name('sim/1')}" and "/" not in safe_name("sim/1")
        assert (group / "cgroup.subtree_control").read_text().split() == ["cpu", "memory", "pids"]
        pod = session.pod("default/trainer-0", 512 * MiB, 1500, pids_max=1024)
        assert pod is not None and pod.paths == (group / safe_name("default/trainer-0"),)
        p = pod.paths[0]
        assert (p / "memory.max").read_text() == str(512 * MiB)
        assert (p / "memory.swap.max").read_text() == "0"
        assert (p / "memory.oom.group").read_text() == "1"
        assert (p / "cpu.max").read_text() == "150000 100000"
        assert (p / "pids.max").read_text() == "1024" and pod.pids_max == 1024 and pod.pids_peak() == 0
        again = session.pod("default/trainer-0", None, 5)  # a restart: a fresh group; 5m is raised to the 1 ms minimum
        assert again is not None and again.paths == (group / (safe_name("default/trainer-0") + "-2"),)
        assert again.memory_bytes is None and (again.paths[0] / "cpu.max").read_text() == "1000 100000"
        assert session.pod("default/free-0", None, None) is None

        pid = os.fork()  # enter() as the pod would: the fake cgroup.procs gets the "0" that means "the writer"
        if pid == 0:
            try:
                pod.enter()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        assert (p / "cgroup.procs").read_text() == "0"
        (p / "cgroup.procs").write_text("")

        assert not pod.oom_killed() and pod.peak_bytes() == 0
        (p / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 1\noom_group_kill 0\n")
        assert pod.machine_oom_killed() and not pod.oom_killed()  # killed within its limit: the machine's OOM killer
        (p / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\noom_group_kill 1\n")
        (p / "memory.peak").write_text(f"{512 * MiB}\n")
        assert pod.oom_killed() and pod.peak_bytes() == 512 * MiB and not pod.machine_oom_killed()
        watched = session.pod("default/free-1", None, None, watch=True)  # no limit: a memory group to watch
        assert watched is not None and not watched.enforced and watched.memory_bytes is None
        assert (watched.paths[0] / "memory.max").read_text() == "max\n"
        (watched.paths[0] / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 2\n")
        assert watched.machine_oom_killed() and not watched.oom_killed()
    assert [p for p in root.iterdir() if p.is_dir()] == []
    assert session.closed


def test_v2_group_with_processes_of_its_own_cannot_limit_its_children(kernel: FakeKernel) -> None:
    root = kernel.root
    v2_group(root, "/", "cpu memory pids", "cpu memory pids")
    scope = "/user.slice/user-1000.slice/user@1000.service/app.slice/term.scope"
    group = v2_group(root, scope, "cpu memory pids", "", f"{os.getpid()}\n")
    found = cgroupfs.probe(root, f"0::{scope}\n")
    assert found.memory is None and found.cpu is None
    assert found.memory_reason == (
        f"cgroup v2 group {group} has processes of its own, so it cannot pass the memory controller "
        "to groups under it (cgroup v2's no-internal-processes rule); run the simulator from a group that does"
    )
    assert found.unenforced()[0].startswith("memory limits not enforced: cgroup v2 group ")
    with Session.create("x", found) as session:
        assert session.groups == {} and session.pod("default/p-0", MiB, 100) is None
    assert [p.name for p in group.iterdir() if p.is_dir()] == []


def test_v2_controller_not_delegated_or_not_writable(kernel: FakeKernel, monkeypatch: pytest.MonkeyPatch) -> None:
    root = kernel.root
    v2_group(root, "/", "cpu memory pids", "pids")
    group = v2_group(root, "/user.slice", "pids", "")
    found = cgroupfs.probe(root, "0::/user.slice\n")
    assert (
        found.memory_reason
        == f"cgroup v2 group {group}: the memory controller is not delegated to it (cgroup.controllers: pids)"
    )
    assert (
        found.cpu_reason
        == f"cgroup v2 group {group}: the cpu controller is not delegated to it (cgroup.controllers: pids)"
    )

    def refuse(path: Path) -> None:
        raise PermissionError(errno.EACCES, "permission denied", str(path))

    v2_group(root, "/empty", "cpu memory", "cpu memory")  # delegated, no processes, but mkdir refused
    monkeypatch.setattr(cgroupfs, "mkdir", refuse)
    found = cgroupfs.probe(root, "0::/empty\n")
    assert (
        found.memory_reason == f"cgroup v2 group {root / 'empty'}: not writable by uid {os.geteuid()} (no delegation)"
    )


def test_v1_memory_and_comounted_cpu(kernel: FakeKernel) -> None:
    root = kernel.root
    memory = root / "memory" / "process_api" / "abc"
    memory.mkdir(parents=True)
    cpu = root / "cpu,cpuacct"
    cpu.mkdir()
    (root / "unified").mkdir()
    v2_group(root / "unified", "/", "hugetlb")
    found = cgroupfs.probe(root, "5:memory:/process_api/abc\n2:cpu,cpuacct:/\n0::/\n")
    assert (found.memory, found.cpu) == (Controller("memory", 1, memory), Controller("cpu", 1, cpu))
    assert found.pids is None and found.pids_reason.endswith(
        "the pids controller is not delegated to it (cgroup.controllers: hugetlb)"
    )

    with Session.create("v1", found) as session:
        pod = session.pod("ns/p-0", 64 * MiB, 250)
        assert pod is not None and len(pod.paths) == 2 and pod.version == 1
        mem, cpu_group = pod.paths
        assert (mem / "memory.limit_in_bytes").read_text() == str(64 * MiB)
        assert (mem / "memory.memsw.limit_in_bytes").read_text() == str(64 * MiB)
        assert (cpu_group / "cpu.cfs_period_us").read_text() == "100000"
        assert (cpu_group / "cpu.cfs_quota_us").read_text() == "25000"
        assert [w for w, _ in kernel.writes if w.parent == mem] == [
            mem / "memory.limit_in_bytes",
            mem / "memory.memsw.limit_in_bytes",
        ]
        assert not pod.oom_killed()
        (mem / "memory.failcnt").write_text("0\n")  # v1: the times its own limit was hit
        (mem / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
        assert pod.machine_oom_killed() and not pod.oom_killed()
        (mem / "memory.failcnt").write_text("3\n")
        (mem / "memory.max_usage_in_bytes").write_text(f"{64 * MiB}\n")
        assert pod.oom_killed() and pod.peak_bytes() == 64 * MiB
        cpu_only = session.pod("ns/q-0", None, 100)
        assert cpu_only is not None and cpu_only.paths[0].parent.parent == cpu and not cpu_only.oom_killed()
    assert [p for p in memory.iterdir() if p.is_dir()] == [] and [p for p in cpu.iterdir() if p.is_dir()] == []


def test_v1_without_the_controller_mounted(kernel: FakeKernel) -> None:
    found = cgroupfs.probe(kernel.root, "4:memory:/x\n1:cpu:/\n")
    assert found.memory_reason == f"cgroup v1 memory controller is not mounted under {kernel.root}"
    assert cgroupfs.probe(kernel.root, "").memory_reason.startswith("no cgroup memory controller")


def test_v1_pids_limit_and_its_note_where_it_is_not_enforced(kernel: FakeKernel) -> None:
    """The per-pod process limit on the v1 pids hierarchy (the kubelet's podPidsLimit as pids.max), its peak read
    back; where no pids controller can be used it is one note of its own, whatever the pods' limits."""
    root = kernel.root
    (root / "memory").mkdir()
    (root / "pids").mkdir()
    found = cgroupfs.probe(root, "5:memory:/\n3:pids:/\n")
    assert found.pids == Controller("pids", 1, root / "pids") and found.unenforced() == [
        "cpu limits not enforced: no cgroup cpu controller: /proc/self/cgroup names neither a v1 cpu hierarchy nor v2"
    ]
    assert capacity.nproc_limit(found) is None  # the cgroup enforces it: no RLIMIT_NPROC needed
    with Session.create("v1-pids", found) as session:
        pod = session.pod("ns/p-0", None, None, watch=True, pids_max=capacity.POD_PIDS_LIMIT)
        assert pod is not None and len(pod.paths) == 2 and not pod.enforced
        pids = next(p for p in pod.paths if p.is_relative_to(root / "pids"))
        assert (pids / "pids.max").read_text() == str(capacity.POD_PIDS_LIMIT)
        (pids / "pids.peak").write_text("35\n")
        assert pod.pids_max == capacity.POD_PIDS_LIMIT and pod.pids_peak() == 35
    off = Controllers(None, None, "m", "c", None, "not writable by uid 65534 (no delegation)")
    assert off.unenforced(limited=False) == ["pids limits not enforced: not writable by uid 65534 (no delegation)"]
    assert off.unenforced() == [
        "memory limits not enforced: m",
        "cpu limits not enforced: c",
        "pids limits not enforced: not writable by uid 65534 (no delegation)",
    ]
    assert capacity.nproc_limit(off) == capacity.POD_PIDS_LIMIT


def test_v1_oom_kills_of_a_group_under_the_pods_count(kernel: FakeKernel) -> None:
    """v1 counts an OOM kill in the victim's own group only: one in the runtime's group for the container, made
    under the pod's, is the pod's too."""
    root = kernel.root
    memory = root / "memory"
    memory.mkdir()
    found = cgroupfs.probe(root, "5:memory:/\n")
    with Session.create("v1-nested", found) as session:
        pod = session.pod("ns/p-0", 64 * MiB, None)
        assert pod is not None and not pod.oom_killed()
        [group] = pod.paths
        kernel.mkdir(group / "runc-container")
        (group / "runc-container" / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
        (group / "memory.failcnt").write_text("2\n")  # charges of the nested group failed at the pod's limit
        assert pod.oom_killed() and not pod.machine_oom_killed()


def test_stale_groups_of_a_dead_simulator_are_swept(kernel: FakeKernel) -> None:
    root = kernel.root
    v2_group(root, "/", "cpu memory", "cpu memory")
    dead = subprocess.Popen(["true"])
    dead.wait()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        stale = root / f"jaxinfra-{dead.pid}-old"
        kernel.mkdir(stale)
        (stale / "cgroup.subtree_control").write_text("memory")
        kernel.mkdir(stale / "pod-0")
        (stale / "pod-0" / "cgroup.procs").write_text(f"{sleeper.pid}\n")  # a pod the dead simulator left running
        (stale / "pod-0" / "cgroup.kill").unlink()  # an older kernel: killed one by one
        live = root / f"jaxinfra-{os.getppid()}-other"
        kernel.mkdir(live)
        found = Controllers(Controller("memory", 2, root), Controller("cpu", 2, root))
        threading.Timer(
            0.2, lambda: (stale / "pod-0" / "cgroup.procs").write_text("")
        ).start()  # the kernel, once it died
        with Session.create("new", found):
            assert not stale.exists() and live.exists()
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
    finally:
        sleeper.kill()
        sleeper.wait()


def test_close_only_in_the_creating_process(kernel: FakeKernel) -> None:
    root = kernel.root
    v2_group(root, "/", "memory", "memory")
    session = Session.create("fork", Controllers(Controller("memory", 2, root), None, "", "off"))
    assert session.controllers.unenforced() == ["cpu limits not enforced: off"]
    pid = os.fork()
    if pid == 0:
        session.close()  # a forked pod inherits the session: it must not tear the groups down
        os._exit(0)
    os.waitpid(pid, 0)
    assert all(g.exists() for g in session.groups.values())
    session.close()
    assert not any(g.exists() for g in session.groups.values())


def test_a_refused_limit_raises_and_leaves_nothing(kernel: FakeKernel, monkeypatch: pytest.MonkeyPatch) -> None:
    root = kernel.root
    v2_group(root, "/", "memory", "memory")
    with Session.create("refused", Controllers(Controller("memory", 2, root), None)) as session:
        [group] = session.groups.values()

        def refuse(path: Path, text: str) -> None:
            raise OSError(errno.EINVAL, "invalid", str(path))

        monkeypatch.setattr(cgroupfs, "write", refuse)
        with pytest.raises(OSError):
            session.pod("default/p-0", MiB, None)
        assert [p for p in group.iterdir() if p.is_dir()] == []
        with pytest.raises(ValueError):
            session.pod("default/p-0", 0, None)


# --- Kubernetes quantities -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"limits": {"memory": "64Mi", "cpu": "500m"}}, (64 * MiB, 500)),
        ({"limits": {"memory": "1.5Gi", "cpu": 2}}, (3 * 2**29, 2000)),
        ({"limits": {"memory": "1e3", "cpu": "0.0001"}}, (1000, 1)),  # rounded up, as Quantity.Value()/MilliValue()
        ({"requests": {"memory": "1Gi", "cpu": "1"}}, (None, None)),  # a request is not a limit
        ({"limits": {"memory": "lots", "cpu": "0"}}, (None, None)),
        ({}, (None, None)),
    ],
)
def test_container_limits(resources: dict, expected: tuple[int | None, int | None]) -> None:
    assert cgroups.container_limits({"name": "c", "resources": resources}) == expected
