"""The kubelet's own safe path handling for volumes (simulate/jaxinfra_sim/runtime/subpath.py): hostile manifests cannot
leave a volume through a symlink race (CVE-2017-1002101, CVE-2021-25741), and a projected file keeps its mode.

First `subpath` itself: a path beneath a trusted folder opened by descriptor (openat2, and the walk of each element
with O_NOFOLLOW|O_DIRECTORY where openat2 is missing), folders made one by one, a file made where nothing is, a tree
walked by descriptors. Then the container's preparation (`volume_manager.sources`, `_own`) and its start
(`sandbox._volumes`, which binds from a descriptor) with a folder swapped for a symlink in between. Then whole
simulations in the style of the issue: a native sidecar that swaps a later container's subPath for a symlink to a
canary folder of this machine while that container starts; a sidecar that swaps a folder of its emptyDir while the
fsGroup walk runs; a Secret with defaultMode 0400 read by a container of another uid. Each checks that the canary is
unchanged: its files' content, its mode and its group. As root and, where the run does not need root, as uid 65534
(tests/support/unprivileged.py).
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import json
import os
import secrets
import shutil
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jaxinfra import yamlio
from jaxinfra.yamlio import dump
from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.core import model, paths
from jaxinfra_sim.core.security import Security
from jaxinfra_sim.kubelet import volume_manager
from jaxinfra_sim.runtime import rootfs, sandbox, subpath
from tests.support import unprivileged
from tests.support.cli import simulate_as
from tests.support.one_pod import one_pod_job
from tests.support.trees import tree_snapshot

pytestmark = pytest.mark.simulator

ROOT_ONLY = pytest.mark.skipif(os.getuid() != 0, reason="needs root (the suite runs as root in CI)")
MODES = pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
FS_GROUP = 2345


# --- subpath: opening beneath a folder ---------------------------------------------------------------------------


@pytest.fixture(params=["openat2", "walk"])
def how(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test of an open runs twice: with openat2 (where the kernel has it), and as on a kernel without it
    (openat2 answers ENOSYS: the walk of each element)."""
    monkeypatch.setattr(subpath, "_missing", False)
    if request.param == "walk":

        def missing(*_: object) -> int:
            raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

        monkeypatch.setattr(subpath, "_openat2", missing)
    return str(request.param)


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A volume's folder (a/b inside, a file a/f) and a descriptor of it; beside it, outside, a canary folder."""
    root = tmp_path / "volume"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "f").write_text("volume's own\n")
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "secret").write_text("machine's own\n")
    fd = subpath.open_root(root)
    yield root, fd
    os.close(fd)


def target(fd: int) -> str:
    return os.readlink(subpath.proc_path(fd))


def test_a_path_beneath_is_opened_without_reading_it(how: str, volume: tuple[Path, int]) -> None:
    root, top = volume
    for relative in ("a/b", "a//b/", "./a/b", "a/f", "", "."):
        fd = subpath.open_beneath(top, relative)
        try:
            assert target(fd) == str(root.joinpath(*subpath.names(relative)))
            assert os.get_inheritable(fd) is False  # close-on-exec: never a container's
            assert fcntl_flags(fd) & os.O_PATH
        finally:
            os.close(fd)


def fcntl_flags(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_GETFL)


@pytest.mark.parametrize("relative", ["a/out", "a/out/secret", "a/inner", "a/inner/x", "a/abs/b"])
def test_a_symlink_on_the_way_or_at_the_end_is_refused(how: str, volume: tuple[Path, int], relative: str) -> None:
    """Whether it points out of the volume or not (`inner`: to its own b): the kubelet's doSafeOpen refuses every
    symlink, also as the last element."""
    root, top = volume
    (root / "a" / "out").symlink_to(root.parent / "canary")
    (root / "a" / "inner").symlink_to("b")
    (root / "a" / "abs").symlink_to(root / "a")
    (root / "a" / "b" / "x").mkdir()
    with pytest.raises(subpath.Unsafe) as err:
        subpath.open_beneath(top, relative)
    assert err.value.errno == errno.ELOOP and "not within volume path" in str(err.value)


@pytest.mark.parametrize("relative", ["../canary", "a/../../canary", "a/b/../../..", "/etc", "/", "a\0b"])
def test_dotdot_absolute_and_nul_are_refused(how: str, volume: tuple[Path, int], relative: str) -> None:
    _, top = volume
    with pytest.raises(subpath.Unsafe) as err:
        subpath.open_beneath(top, relative)
    assert err.value.errno == errno.EINVAL


def test_a_missing_path_is_the_kernels_answer(how: str, volume: tuple[Path, int]) -> None:
    _, top = volume
    with pytest.raises(FileNotFoundError):
        subpath.open_beneath(top, "a/missing/x")
    with pytest.raises(NotADirectoryError):
        subpath.open_beneath(top, "a/f/x")


def test_a_fifo_never_blocks_the_walk(how: str, volume: tuple[Path, int]) -> None:
    """A container may leave a FIFO where a folder was: the walk opens folders O_PATH|O_DIRECTORY, never blocks."""
    root, top = volume
    os.mkfifo(root / "a" / "fifo")
    with pytest.raises(NotADirectoryError):
        subpath.open_beneath(top, "a/fifo/x")
    os.close(subpath.open_beneath(top, "a/fifo"))  # O_PATH: opened, not read


def test_without_openat2_the_walk_is_used_and_remembered(
    volume: tuple[Path, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, top = volume
    calls: list[str] = []

    def missing(dirfd: int, path: str, flags: int, resolve: int) -> int:
        calls.append(path)
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

    monkeypatch.setattr(subpath, "_missing", False)
    monkeypatch.setattr(subpath, "_openat2", missing)
    for _ in range(3):
        fd = subpath.open_beneath(top, "a/b")
        assert target(fd) == str(root / "a" / "b")
        os.close(fd)
    assert calls == ["a/b"]  # asked once: ENOSYS is the kernel's answer for the process's life


def test_openat2_is_asked_with_beneath_and_no_symlinks(
    volume: tuple[Path, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, top = volume
    seen: list[int] = []
    real = subpath._openat2

    def spy(dirfd: int, path: str, flags: int, resolve: int) -> int:
        seen.append(resolve)
        return real(dirfd, path, flags, resolve)

    monkeypatch.setattr(subpath, "_missing", False)
    monkeypatch.setattr(subpath, "_openat2", spy)
    try:
        os.close(subpath.open_beneath(top, "a/b"))
    except OSError as err:  # pragma: no cover - a kernel before 5.6
        pytest.skip(f"openat2: {err}")
    assert seen == [subpath.RESOLVE_BENEATH | subpath.RESOLVE_NO_SYMLINKS | subpath.RESOLVE_NO_MAGICLINKS]


# --- subpath: making folders and files ---------------------------------------------------------------------------


def test_nested_folders_are_made_one_by_one_with_their_mode(how: str, volume: tuple[Path, int]) -> None:
    root, top = volume
    old = os.umask(0o077)
    try:
        fd = subpath.make_dirs(top, "a/b/c/d/e", 0o2775)
    finally:
        os.umask(old)
    try:
        assert target(fd) == str(root / "a" / "b" / "c" / "d" / "e")
    finally:
        os.close(fd)
    for made in ("a/b/c", "a/b/c/d", "a/b/c/d/e"):
        assert stat.S_IMODE((root / made).stat().st_mode) == 0o2775, made  # fchmod: the umask does not apply
    assert stat.S_IMODE((root / "a" / "b").stat().st_mode) != 0o2775  # what existed is left as it is


def test_a_folder_is_never_made_through_a_symlink(how: str, volume: tuple[Path, int]) -> None:
    root, top = volume
    (root / "a" / "link").symlink_to(root.parent / "canary")
    with pytest.raises(subpath.Unsafe, match="'link' is a symlink|symlink on the way"):
        subpath.make_dirs(top, "a/link/new")
    assert sorted(p.name for p in (root.parent / "canary").iterdir()) == ["secret"]


def test_a_swap_between_mkdir_and_open_is_refused(volume: tuple[Path, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """doSafeMakeDir's reason to open what it made with O_NOFOLLOW: a folder swapped for a symlink right after
    mkdirat is refused, not entered."""
    root, top = volume
    canary = root.parent / "canary"
    real_mkdir = os.mkdir

    def mkdir_then_swap(path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        real_mkdir(path, mode, dir_fd=dir_fd)
        if path == "swapped":
            os.rename("swapped", "moved", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            os.symlink(str(canary), "swapped", dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", mkdir_then_swap)
    with pytest.raises(subpath.Unsafe):
        subpath.make_dirs(top, "a/swapped/deeper", 0o777)
    assert sorted(p.name for p in canary.iterdir()) == ["secret"]
    assert stat.S_IMODE(canary.stat().st_mode) != 0o777


def test_a_file_is_made_only_where_nothing_is_with_its_mode(how: str, volume: tuple[Path, int]) -> None:
    root, top = volume
    subpath.write_file(top, "x/y/key", b"value", 0o400)
    made = root / "x" / "y" / "key"
    assert made.read_bytes() == b"value" and stat.S_IMODE(made.stat().st_mode) == 0o400
    assert stat.S_IMODE((root / "x").stat().st_mode) == 0o755
    with pytest.raises(FileExistsError):
        subpath.write_file(top, "x/y/key", b"again")
    (root / "x" / "link").symlink_to(root.parent / "canary" / "secret")
    with pytest.raises(FileExistsError):  # O_EXCL|O_NOFOLLOW: never written through
        subpath.write_file(top, "x/link", b"pwned")
    assert (root.parent / "canary" / "secret").read_text() == "machine's own\n"


def test_resolve_reads_symlinks_once_within_the_volume(volume: tuple[Path, int]) -> None:
    """The kubelet's EvalSymlinks before doSafeOpen: a link inside the volume is read once, here; one out of it is
    refused with the manifest's field named."""
    root, _ = volume
    (root / "a" / "inner").symlink_to("b")
    (root / "a" / "out").symlink_to(root.parent / "canary")
    assert subpath.resolve(root, "a/inner/new", "w subPath") == subpath.Source(root.resolve(), "a/b/new", "w subPath")
    assert subpath.resolve(root, "", "w").relative == ""
    with pytest.raises(paths.UnsafePath, match="w subPath.*leads out of its volume through a symlink"):
        subpath.resolve(root, "a/out", "w subPath")


def test_a_source_swapped_after_it_was_resolved_does_not_open(how: str, volume: tuple[Path, int]) -> None:
    root, _ = volume
    source = subpath.resolve(root, "a/b", "w subPath")
    os.close(source.open())
    (root / "a" / "b").rename(root / "a" / "moved")
    (root / "a" / "b").symlink_to(root.parent / "canary")
    with pytest.raises(subpath.Unsafe, match="not within volume path"):
        source.open()


# --- subpath: the fsGroup walk ----------------------------------------------------------------------------------


def machine_state(folder: Path) -> dict[str, Any]:
    """A canary's every path, itself included: its content (files), mtime, mode, owner and group."""
    out: dict[str, Any] = dict(tree_snapshot(folder))
    for path in (folder, *folder.rglob("*")):
        st = path.lstat()
        out[f"{path} (inode)"] = (st.st_mode, st.st_uid, st.st_gid)
    return out


@ROOT_ONLY
def test_the_fsgroup_walk_never_follows_a_symlink(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    (canary / "sub").mkdir(parents=True)
    (canary / "sub" / "file").write_text("machine's own\n")
    before = machine_state(canary)
    root = tmp_path / "volume"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_text("x")
    (root / "to-folder").symlink_to(canary)
    (root / "d" / "to-file").symlink_to(canary / "sub" / "file")
    (root / "dangling").symlink_to(tmp_path / "nowhere")
    top = subpath.open_root(root)
    try:
        subpath.give_tree(top, FS_GROUP, 0o060, 0o2070)
    finally:
        os.close(top)
    assert machine_state(canary) == before
    for path in (root, root / "d", root / "d" / "f"):
        assert path.stat().st_gid == FS_GROUP, path
    assert stat.S_IMODE((root / "d").stat().st_mode) & 0o2070 == 0o2070
    assert (root / "to-folder").lstat().st_gid != FS_GROUP  # a symlink itself is left alone (changeFilePermission)


@ROOT_ONLY
def test_the_fsgroup_walk_is_safe_while_a_container_swaps_folders(tmp_path: Path) -> None:
    """The issue's race, in process: while `_own` walks an emptyDir, a thread swaps one of its folders for a symlink
    to a canary folder and back as fast as it can. The canary keeps its mode and group; nothing raises."""
    canary = tmp_path / "canary"
    (canary / "deep").mkdir(parents=True)
    (canary / "deep" / "file").write_text("machine's own\n")
    canary.chmod(0o755)
    before = machine_state(canary)
    pod = _pod((model.Mount("scratch", "/scratch", kind="emptyDir"),), fs_group=FS_GROUP)
    volume = tmp_path / "pod" / "volumes" / paths.safe_name("scratch")
    (volume / "d" / "deep").mkdir(parents=True)
    for i in range(30):
        (volume / "d" / f"f{i}").write_text("x")
    stop = threading.Event()

    def swap() -> None:
        d, moved, link = volume / "d", volume / "moved", volume / "link"
        link.symlink_to(canary)
        while not stop.is_set():
            d.rename(moved)
            link.rename(d)  # d is now the symlink to the canary
            d.rename(link)
            moved.rename(d)

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        for _ in range(200):
            volume_manager._own(volume, pod.mounts[0], pod.security)
    finally:
        stop.set()
        swapper.join()
    assert machine_state(canary) == before


# --- the container's preparation and start ----------------------------------------------------------------------


def _pod(mounts: tuple[model.Mount, ...], fs_group: int | None = None, uid: int = 0) -> model.Pod:
    [workload] = emulate(yamlio.load(one_pod_job("true"))).workloads
    return dataclasses.replace(workload.pods[0], mounts=mounts, security=Security(uid=uid, fs_group=fs_group))


def _volumes(pod: model.Pod, tmp_path: Path) -> list[tuple[subpath.Source, str, bool]]:
    return volume_manager.sources(
        pod, tmp_path / "pod", tmp_path / "pod" / "sandbox", lambda m: tmp_path / "storage" / paths.safe_name(m.key)
    )


def test_a_subpath_is_made_beneath_its_volume_with_the_volumes_mode(tmp_path: Path) -> None:
    pod = _pod((model.Mount("scratch", "/work", sub_path="run/1", kind="emptyDir"),))
    [(source, path, read_only)] = _volumes(pod, tmp_path)
    volume = tmp_path / "pod" / "volumes" / paths.safe_name("scratch")
    assert (source.root, source.relative, path, read_only) == (volume.resolve(), "run/1", "/work", False)
    assert stat.S_IMODE((volume / "run" / "1").stat().st_mode) == 0o777  # SafeMakeDir: the emptyDir's own 0777
    fd = source.open()
    try:
        assert target(fd) == str(volume.resolve() / "run" / "1")
    finally:
        os.close(fd)


def test_a_subpath_swapped_after_its_preparation_does_not_open(tmp_path: Path) -> None:
    """What the sidecar of the issue does between the kubelet's check and the bind: the bind's open refuses it."""
    canary = tmp_path / "canary"
    canary.mkdir()
    pod = _pod((model.Mount("scratch", "/work", sub_path="work", kind="emptyDir"),))
    [(source, _, _)] = _volumes(pod, tmp_path)
    volume = tmp_path / "pod" / "volumes" / paths.safe_name("scratch")
    (volume / "work").rename(volume / "moved")
    (volume / "work").symlink_to(canary)
    with pytest.raises(subpath.Unsafe):
        source.open()


def test_a_hostpath_on_its_node_is_made_beneath_the_nodes_folder(tmp_path: Path) -> None:
    node = tmp_path / "node"
    canary = tmp_path / "canary"
    canary.mkdir()
    mounts = (
        model.Mount("data", "/data", kind="hostPath", key="/var/data/x", host_type="DirectoryOrCreate", node="n"),
        model.Mount("sock", "/run/s.sock", kind="hostPath", key="/run/s.sock", host_type="Socket", node="n"),
        model.Mount("logs", "/logs", sub_path="pod/1", kind="hostPath", key="/var/log", node="n"),
    )

    def storage(m: model.Mount) -> Path:
        return paths.on_node(node, m.key)

    got = volume_manager.sources(_pod(mounts), tmp_path / "pod", tmp_path / "pod" / "sandbox", storage)
    assert [(s.root, s.relative) for s, _, _ in got] == [
        (node.resolve(), "var/data/x"),
        (node.resolve(), "run/s.sock"),
        (node.resolve(), "var/log/pod/1"),
    ]
    assert (node / "var" / "data" / "x").is_dir() and stat.S_IMODE((node / "var").stat().st_mode) == 0o755
    assert (node / "run" / "s.sock").is_file() and stat.S_IMODE((node / "run" / "s.sock").stat().st_mode) == 0o644
    # a container with the node's / mounted swaps /var for a symlink out: the next start's hostPath is refused
    (node / "var").rename(node / "old")
    (node / "var").symlink_to(canary)
    with pytest.raises(paths.UnsafePath, match="leads out of its volume through a symlink"):
        volume_manager.sources(_pod(mounts[:1]), tmp_path / "pod", tmp_path / "pod" / "sandbox", storage)
    with pytest.raises(subpath.Unsafe):
        got[0][0].open()
    assert list(canary.iterdir()) == []


def test_a_files_volume_keeps_each_files_mode(tmp_path: Path) -> None:
    mount = model.Mount(
        "creds",
        "/creds",
        kind="files",
        read_only=True,
        files=(("token", "t"), ("conf/app.yaml", "a: 1"), ("run.sh", "echo")),
        modes=(("token", 0o400), ("conf/app.yaml", 0o644), ("run.sh", 0o755)),
    )
    [(source, _, _)] = _volumes(_pod((mount,)), tmp_path)
    modes = {name: stat.S_IMODE((source.path / name).stat().st_mode) for name in ("token", "conf/app.yaml", "run.sh")}
    assert modes == {"token": 0o400, "conf/app.yaml": 0o644, "run.sh": 0o755}
    assert (source.path / "token").read_text() == "t"


@ROOT_ONLY
def test_a_files_volume_with_fsgroup_is_the_groups_and_group_readable(tmp_path: Path) -> None:
    """The kubelet's rule for a secret or configMap volume with fsGroup (volume_linux.go changeFilePermission: the
    group is fsGroup, a read-only volume's files gain 0440, its folders 0550 and setgid)."""
    mount = model.Mount(
        "creds",
        "/creds",
        kind="files",
        read_only=True,
        files=(("token", "t"), ("d/key", "k")),
        modes=(("token", 0o400),),
    )
    [(source, _, _)] = _volumes(_pod((mount,), fs_group=FS_GROUP), tmp_path)
    token, key = (source.path / "token").stat(), (source.path / "d" / "key").stat()
    assert (stat.S_IMODE(token.st_mode), token.st_gid) == (0o440, FS_GROUP)
    assert (stat.S_IMODE(key.st_mode), key.st_gid) == (0o644, FS_GROUP)
    assert stat.S_IMODE((source.path / "d").stat().st_mode) & 0o2550 == 0o2550


def test_modes_come_from_default_mode_and_items(tmp_path: Path) -> None:
    """defaultMode for every file of a volume, items[].mode over it, 0644 where neither says (the API server's
    default); a projected volume's defaultMode for all its sources."""
    objects = (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {token: t, ca: c}\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {app: a, run: r}\n---\n"
    )
    volumes = [
        "{name: s, secret: {secretName: creds, defaultMode: 0400}}",
        "{name: c, configMap: {name: cfg, items: [{key: app, path: app}, {key: run, path: run, mode: 0755}]}}",
        "{name: d, downwardAPI: {defaultMode: 0440, items: [{path: name, fieldRef: {fieldPath: metadata.name}},"
        " {path: labels, mode: 0600, fieldRef: {fieldPath: metadata.labels}}]}}",
        "{name: p, projected: {defaultMode: 0600, sources: [{secret: {name: creds, items: [{key: ca, path: ca,"
        " mode: 0444}]}}, {configMap: {name: cfg, items: [{key: app, path: app}]}}]}}",
    ]
    mounts = ", ".join(f"{{name: {v}, mountPath: /{v}}}" for v in "scdp")
    text = objects + one_pod_job("true", f"[{', '.join(volumes)}]", f"[{mounts}]")
    [workload] = emulate(yamlio.load(text)).workloads
    modes = {m.volume: dict(m.modes) for m in workload.pods[0].mounts}
    assert modes == {
        "s": {"token": 0o400, "ca": 0o400},
        "c": {"app": 0o644, "run": 0o755},
        "d": {"name": 0o440, "labels": 0o600},
        "p": {"ca": 0o444, "app": 0o600},
    }


# --- the start binds from a descriptor --------------------------------------------------------------------------

CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE = 16384, 1 << 18


def in_mount_namespace(work: Any) -> dict[str, Any]:
    """`work()` in a forked child in a mount namespace of its own (root): what it returns (JSON), or its error."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        out: dict[str, Any]
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(CLONE_NEWNS) != 0 or libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
                raise OSError(ctypes.get_errno(), "unshare")
            out = {"ok": work()}
        except BaseException as err:  # noqa: BLE001 - the parent reports it
            out = {"error": f"{type(err).__name__}: {err}"}
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data)


@ROOT_ONLY
def test_the_start_binds_the_volume_from_its_descriptor_and_refuses_a_swapped_one(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "secret").write_text("machine's own\n")
    volume = tmp_path / "volume"
    (volume / "work").mkdir(parents=True)
    (volume / "work" / "mine").write_text("volume's own\n")
    (tmp_path / "hosts").write_text("127.0.0.1 localhost\n")
    source = subpath.resolve(volume, "work", 'subPath for volumeMount "scratch"')
    spec = sandbox.Spec("h", tmp_path, tmp_path / "hosts", mounts=[(source, "/srv/volume", False)])
    root = tmp_path / "root"
    root.mkdir()

    def start() -> list[str]:
        libc = sandbox._libc()
        b = rootfs.Builder(libc, root, root, read_only=False)
        b.tmpfs(root)
        sandbox._volumes(b, spec)
        return sorted(os.listdir(root / "srv" / "volume"))

    assert in_mount_namespace(start) == {"ok": ["mine"]}
    (volume / "work").rename(volume / "moved")
    (volume / "work").symlink_to(canary)
    found = in_mount_namespace(start)
    assert "CreateContainerConfigError: failed to prepare subPath for volumeMount" in found["error"]
    assert "not within volume path" in found["error"]


@ROOT_ONLY
def test_a_swap_after_the_open_still_binds_what_was_opened(tmp_path: Path) -> None:
    """The descriptor, not the path: /proc/self/fd/N binds the folder opened, whatever its name leads to since."""
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "secret").write_text("machine's own\n")
    volume = tmp_path / "volume"
    (volume / "work").mkdir(parents=True)
    (volume / "work" / "mine").write_text("volume's own\n")
    target_dir = tmp_path / "target"
    target_dir.mkdir()

    def bind() -> list[str]:
        fd = subpath.resolve(volume, "work", "w").open()
        (volume / "work").rename(volume / "moved")
        (volume / "work").symlink_to(canary)
        b = rootfs.Builder(sandbox._libc(), tmp_path, tmp_path, read_only=False)
        b.bind(subpath.proc_path(fd), target_dir, read_only=False)
        return sorted(os.listdir(target_dir))

    assert in_mount_namespace(bind) == {"ok": ["mine"]}


# --- whole simulations: the attacks ---------------------------------------------------------------------


@pytest.fixture
def home() -> Iterator[Path]:
    folder = unprivileged.scratch_home()
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=False)


@pytest.fixture
def canary() -> Iterator[Path]:
    """A folder of this machine that the attacks aim at, outside every folder of the run (given to uid 65534 when
    root, so an unprivileged simulator that leaked could write it), mode 0755."""
    folder = Path(f"/tmp/jaxinfra-canary-{secrets.token_hex(4)}")
    (folder / "deep").mkdir(parents=True)
    (folder / "file").write_text("machine's own\n")
    (folder / "deep" / "file").write_text("machine's own, deeper\n")
    for path in (folder, folder / "deep", folder / "file", folder / "deep" / "file"):
        path.chmod(0o755 if path.is_dir() else 0o644)
        if os.getuid() == 0:
            os.chown(path, unprivileged.NOBODY, unprivileged.NOBODY)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def pod_with_sidecar(
    sidecar: list[str], main: str, mounts: list[dict[str, Any]], ready: str | None = None, **pod: Any
) -> str:
    """A one-pod Indexed Job: a native sidecar (an init container with restartPolicy Always) running the argv
    `sidecar` with the emptyDir `scratch` at /scratch (started once the file `ready` exists, where given: its startup
    probe), then the main container running `main` with `mounts`."""
    swapper: dict[str, Any] = {
        "name": "swapper",
        "image": "busybox:1.36",
        "restartPolicy": "Always",
        "command": sidecar,
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
    }
    if ready is not None:
        swapper["startupProbe"] = {"exec": {"command": ["test", "-e", ready]}, "periodSeconds": 1}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "initContainers": [swapper],
        "containers": [{"name": "w", "image": "busybox:1.36", "command": ["sh", "-c", main], "volumeMounts": mounts}],
        **pod,
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "race"},
        "spec": {"completionMode": "Indexed", "completions": 1, "backoffLimit": 0, "template": {"spec": spec}},
    }
    return dump([job])


def stderr_of(report: dict[str, Any]) -> str:
    """Every container's stderr tail in the report, one text."""
    lines = []
    for w in report.get("workloads", []):
        for a in w["attempts"]:
            for p in a["pods"]:
                lines += p.get("stderr_tail", [])
                for c in p.get("containers", []):
                    lines += c.get("stderr_tail", [])
    return "\n".join(lines)


#: The issue's sidecar: it waits, in a tight loop, until the kubelet has checked and made the later container's subPath
#: /scratch/work, then swaps it for a symlink to CANARY at once (Python: no fork and exec between the two).
SWAPPER = """
import os, sys, time
open("/scratch/ready", "w").close()
while not os.path.isdir("/scratch/work"):
    pass
os.rename("/scratch/work", "/scratch/moved")
os.symlink(sys.argv[1], "/scratch/work")
print("SWAPPED", file=sys.stderr, flush=True)
time.sleep(30)
"""


@MODES
def test_a_sidecar_that_swaps_a_later_containers_subpath_gets_no_folder_of_the_machine(
    home: Path, canary: Path, as_root: bool
) -> None:
    """CVE-2017-1002101's pattern: the sidecar waits until the kubelet has checked and made `w`'s subPath `work`,
    then swaps it for a symlink to a canary folder of this machine; bound by its path, `w` would get that folder,
    read-write. Its start is refused instead: where the swap came right after the kubelet's mkdirat, by the open that
    follows it (the simulation stops, exit 2, as for any symlink a container planted on a volume's path, or for the
    name gone where the open came between the sidecar's rename and its symlink); later, by
    the open beneath the volume at the bind (the kubelet's CreateContainerConfigError); where its bind came first,
    it writes the folder that was checked. The canary is unchanged in every case."""
    main = "echo WROTE >&2; for f in /work/*; do echo pwned > $f; done; chmod 777 /work; echo pwned > /work/new"
    before = machine_state(canary)
    text = pod_with_sidecar(
        ["python3", "-c", SWAPPER, str(canary)],
        main,
        [{"name": "scratch", "mountPath": "/work", "subPath": "work"}],
        ready="/scratch/ready",
    )
    rc, out, report = simulate_as(home, text, "--run-command", "--timeout", "60", as_root=as_root)
    assert machine_state(canary) == before, out
    seen = stderr_of(report)
    if rc == 2:  # swapped between the kubelet's mkdirat and its open (doSafeMakeDir): refused there, nothing starts
        # the open saw the symlink, or came between the sidecar's rename and its symlink (the name gone: ENOENT)
        assert (
            "subPath = 'work': subpath 'work' not within volume path: 'work' is a symlink" in out
            or "subPath = 'work': the kubelet cannot create it: No such file or directory" in out
        ), out
    elif rc == 1:  # swapped before the bind: the container's start is the kubelet's CreateContainerConfigError
        assert "SWAPPED" in seen and "WROTE" not in seen, out
        assert "CreateContainerConfigError: failed to prepare" in seen and "not within volume path" in seen, out
    else:  # its bind came first: it got the folder that was checked
        assert rc == 0 and "SWAPPED" in seen and "WROTE" in seen, out


@ROOT_ONLY
def test_a_sidecar_that_swaps_folders_during_the_fsgroup_walk_changes_nothing_of_the_machine(
    home: Path, canary: Path
) -> None:
    """The fsGroup walk, as root, of an emptyDir whose sidecar keeps swapping a folder for a symlink to a canary
    folder while the main container starts (its preparation walks the volume): the canary keeps its mode (0755,
    not 2777) and its group."""
    sidecar = (
        "mkdir -p /scratch/d/e && for i in $(seq 40); do echo x > /scratch/d/f$i; done; "
        f"ln -s {canary} /scratch/link; echo READY > /scratch/ready; "
        "while :; do mv /scratch/d /scratch/m; mv /scratch/link /scratch/d; "
        "mv /scratch/d /scratch/link; mv /scratch/m /scratch/d; done"
    )
    main = "test -e /scratch/ready"
    before = machine_state(canary)
    text = pod_with_sidecar(
        ["sh", "-c", sidecar],
        main,
        [{"name": "scratch", "mountPath": "/scratch"}],
        ready="/scratch/ready",
        securityContext={"fsGroup": FS_GROUP},
    )
    # the main container starts once the sidecar swaps (its startup probe): its walk races it; a few rounds
    for _ in range(3):
        rc, out, _ = simulate_as(home, text, "--run-command", "--timeout", "60")
        assert rc in (0, 1), out
        assert machine_state(canary) == before, out


@ROOT_ONLY
def test_a_secret_with_default_mode_0400_is_not_readable_by_another_uid(home: Path) -> None:
    """The Secret's files are the kubelet's (root's here), mode 0400: a container running as uid 1000 cannot read
    them; an item with mode 0444 it can; `stat` shows each file's mode."""
    secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {token: s3cret, ca: c}\n---\n"
    script = (
        "echo MODE_TOKEN=$(stat -L -c %a /creds/token) >&2; echo MODE_CA=$(stat -L -c %a /creds/ca) >&2; "
        "if cat /creds/token; then echo READ_TOKEN=yes >&2; else echo READ_TOKEN=no >&2; fi; "
        "echo READ_CA=$(cat /creds/ca) >&2"
    )
    volumes = (
        "[{name: creds, secret: {secretName: creds, defaultMode: 0400, items: [{key: token, path: token},"
        " {key: ca, path: ca, mode: 0444}]}}]"
    )
    text = secret + one_pod_job(script, volumes, "[{name: creds, mountPath: /creds}]").replace(
        "restartPolicy: Never", "restartPolicy: Never\n      securityContext: {runAsUser: 1000, runAsGroup: 1000}"
    )
    rc, out, report = simulate_as(home, text, "--run-command", "--timeout", "60")
    seen = stderr_of(report)
    assert rc == 0, out
    assert "MODE_TOKEN=400" in seen and "MODE_CA=444" in seen, seen
    assert "READ_TOKEN=no" in seen and "READ_CA=c" in seen and "s3cret" not in seen, seen
