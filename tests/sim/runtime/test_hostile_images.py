"""Images and caches as hostile input (simulate/jaxinfra_sim/runtime/oci_image.py, image_cache.py, tar_headers.py,
confined.py): files that would hang or stall a reader, archives whose headers lie, images past their bounds, configs
containerd refuses, caches another user owns. Each refusal is one line (exit 2) in well under 2 s, never a traceback,
and the machine is unchanged: as root and as uid 65534."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jaxinfra_sim.runtime import confined, image_cache, oci_image
from tests.sim.runtime.test_images import NAME, _cache, _given, _run_image
from tests.sim.runtime.test_sandbox import MODES
from tests.support import images, unprivileged

pytestmark = pytest.mark.simulator


@pytest.fixture
def home() -> Iterator[Path]:
    folder = unprivileged.scratch_home()
    yield folder
    subprocess.run(["rm", "-rf", str(folder), f"{folder}-root"], check=False)


def _refused(r: subprocess.CompletedProcess[str], *words: str) -> str:
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 2, out
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    for word in words:
        assert word in out, out
    return out


# --- files a reader would wait on ----------------------------------------------------------------------------------


@MODES
def test_a_fifo_or_a_device_given_as_the_image_is_refused_at_once(home: Path, as_root: bool) -> None:
    """A FIFO (no writer: a blocking open would wait forever) and /dev/zero (endless): neither a layout nor a file
    a `docker save` wrote; one problem naming --image, at once."""
    fifo = home / "image.tar"
    os.mkfifo(fifo)
    os.chmod(fifo, 0o666)
    for path in (fifo, Path("/dev/zero")):
        start = time.monotonic()
        r = _run_image(home, path, as_root=as_root)
        assert time.monotonic() - start < 30  # the whole CLI; what is measured is that it ends
        out = (r.stdout + r.stderr).strip()
        assert r.returncode == 2 and "--image" in out and "Traceback" not in out, out


@MODES
def test_a_layer_blob_that_is_a_fifo_is_refused_before_umoci_reads_it(home: Path, as_root: bool) -> None:
    path = _given(home, "layout", images.Spec([images.busybox_layer()], cmd=["true"]))
    manifest = json.loads((path / "index.json").read_text())["manifests"][0]["digest"][7:]
    layer = json.loads((path / "blobs" / "sha256" / manifest).read_text())["layers"][0]["digest"][7:]
    blob = path / "blobs" / "sha256" / layer
    blob.unlink()
    os.mkfifo(blob)
    os.chmod(blob, 0o666)
    start = time.monotonic()
    _refused(_run_image(home, path, as_root=as_root), f"blob sha256:{layer} is not a regular file")
    assert time.monotonic() - start < 30


# --- archives whose headers lie ------------------------------------------------------------------------------------


def _header(name: str, size_field: bytes, flag: bytes = b"0") -> bytes:
    """A USTAR header written byte by byte, its size field as given (a library refuses to write a bad one)."""
    h = bytearray(512)
    h[0 : len(name)] = name.encode()
    h[100:108] = b"0000644\0"
    h[108:116] = h[116:124] = b"0000000\0"
    h[124:136] = size_field
    h[136:148] = b"00000000000\0"
    h[156:157] = flag
    h[257:265] = b"ustar\x0000"
    h[148:156] = b" " * 8
    h[148:156] = f"{sum(h):06o}\0 ".encode()
    return bytes(h)


NEGATIVE = b"\xff" * 12  # base-256, its sign bit set: a negative size (CPython's tarfile loops on it: CVE-2025-8194)


@MODES
def test_an_archive_with_a_negative_member_size_is_refused_at_once(home: Path, as_root: bool) -> None:
    archive = home / "image.tar"
    archive.write_bytes(_header("manifest.json", NEGATIVE) + bytes(1024))
    os.chmod(archive, 0o644)
    _refused(_run_image(home, archive, as_root=as_root), "negative size")


@pytest.mark.unit
def test_the_header_reader_is_bounded_whatever_the_headers_say(tmp_path: Path) -> None:
    """Go's rules, in bounded time: a size that is not octal, one past the end, a PAX record over Go's 1 MiB,
    a malformed PAX record; a 1,000,000-byte PAX header (within Go's bound) is read once, linearly; the documents
    asked for are found under a PAX path and a GNU long name."""
    from jaxinfra_sim.runtime import tar_headers

    def read(data: bytes) -> dict[str, bytes]:
        path = tmp_path / "a.tar"
        path.write_bytes(data)
        fd = os.open(path, os.O_RDONLY)
        try:
            return tar_headers.documents(fd, ("manifest.json",), 1 << 20)
        finally:
            os.close(fd)

    cases = {
        b"not an octal number": _header("manifest.json", b"12345678901x"),
        b"past the end": _header("manifest.json", b"00000001000\0"),
        b"a 2000000-byte header record": _header("pax", b"00007502200\0", b"x") + bytes(2_000_000 + 512),
        b"malformed": _header("pax", b"00000000012\0", b"x") + b"99 path=x\n".ljust(512, b"\0") + bytes(1024),
    }
    for why, data in cases.items():
        with pytest.raises(tar_headers.TarError, match=why.decode()):
            read(data)
    doc = b'[{"Config":"c"}]'
    record = b"path=manifest.json\n"
    big = b"comment=" + b"a" * 999_900 + b"\n"
    records = b""
    for line in (record, big):
        n = len(line) + 2
        n = len(f"{n + len(str(n)) - 1} ".encode()) + len(line)
        records += f"{n} ".encode() + line
    pad = lambda b: b + bytes(-len(b) % 512)  # noqa: E731
    pax = _header("PaxHeaders/x", f"{len(records):011o}\0".encode(), b"x") + pad(records)
    body = _header("ignored-name", f"{len(doc):011o}\0".encode()) + pad(doc)
    start = time.monotonic()
    assert read(pax + body + bytes(1024)) == {"manifest.json": doc}
    assert time.monotonic() - start < 5
    long = _header("././@LongLink", f"{len(b'./manifest.json'):011o}\0".encode(), b"L") + pad(b"./manifest.json")
    assert read(long + body + bytes(1024)) == {"manifest.json": doc}


@MODES
def test_a_long_name_that_is_dev_is_seen_as_the_unpacker_writes_it(home: Path, as_root: bool) -> None:
    """A GNU long name that umoci cleans to `dev`, a symlink out of the root: the one reading that counts is the
    unpacked tree's, so the link at /dev is refused whatever a scanner would have made of the name."""
    canary = home / "canary"
    canary.mkdir()
    layout = home / "layout"
    images.layout(layout, images.Spec([images.busybox_layer()], cmd=["true"]))
    long_dev = "./" * 60 + "dev"
    layer = home / "layer.tar"
    with tarfile.open(layer, "w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo(long_dev)
        info.type, info.linkname = tarfile.SYMTYPE, str(canary)
        tar.addfile(info)
    path = _edited(layout, layer.read_bytes())
    subprocess.run(["chmod", "-R", "a+rX", str(home)], check=True)
    _refused(_run_image(home, path, as_root=as_root), "entry 'dev' is not a folder")
    assert list(canary.iterdir()) == []


@MODES
def test_a_device_header_with_a_field_that_is_not_octal_leaves_no_device_anywhere(home: Path, as_root: bool) -> None:
    """A V7 header (no magic) for a character device whose major number is not octal, then a device node: Python's
    tarfile stopped reading there silently while the unpacker went on. Whatever umoci (Go's reader) makes of it, the
    verdict is one line or a run, and no device node is in the cache."""
    bad = bytearray(_header("dev/evil", b"00000000000\0", b"3"))
    bad[257:265] = bytes(8)  # V7: no magic
    bad[329:337] = b"zz\0\0\0\0\0\0"  # devmajor
    bad[148:156] = b" " * 8
    bad[148:156] = f"{sum(bad):06o}\0 ".encode()
    node = bytearray(_header("mem", b"00000000000\0", b"3"))
    node[329:337], node[337:345] = b"0000001\0", b"0000001\0"
    node[148:156] = b" " * 8
    node[148:156] = f"{sum(node):06o}\0 ".encode()
    layout = home / "layout"
    images.layout(layout, images.Spec([images.busybox_layer()], cmd=["/bin/busybox", "true"]))
    path = _edited(layout, bytes(bad) + bytes(node) + bytes(1024))
    subprocess.run(["chmod", "-R", "a+rX", str(layout)], check=True)
    r = _run_image(home, path, as_root=as_root)
    out = (r.stdout + r.stderr).strip()
    assert r.returncode in (0, 2) and "Traceback" not in out, out
    cache = _cache(home, as_root)
    found = [p for p in cache.rglob("*") if stat.S_ISCHR(p.lstat().st_mode) or stat.S_ISBLK(p.lstat().st_mode)]
    assert found == []


def _edited(layout: Path, layer: bytes | None = None, **config: object) -> Path:
    """`layout` with one more (uncompressed) `layer` on top and/or its config's `config` fields set, its digests
    written anew (config, manifest, index)."""
    blobs = layout / "blobs" / "sha256"

    def blob(data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return f"sha256:{digest}"

    index = json.loads((layout / "index.json").read_text())
    manifest = json.loads((blobs / index["manifests"][0]["digest"][7:]).read_text())
    document = json.loads((blobs / manifest["config"]["digest"][7:]).read_text())
    document["config"].update(config)
    if layer is not None:
        described = {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": blob(layer), "size": len(layer)}
        manifest["layers"].append(described)
        document["rootfs"]["diff_ids"].append(described["digest"])
    raw = json.dumps(document).encode()
    manifest["config"].update(digest=blob(raw), size=len(raw))
    raw = json.dumps(manifest).encode()
    index["manifests"][0].update(digest=blob(raw), size=len(raw))
    (layout / "index.json").write_text(json.dumps(index))
    return layout


# --- bounds ---------------------------------------------------------------------------------------------------------


@MODES
def test_an_image_past_its_bounds_is_refused_with_the_figure(home: Path, as_root: bool) -> None:
    """A 64 KiB layer that unpacks to 64 MiB (zeros) past `--image-limits size=8Mi`, and 300 files past `files=100`:
    one line each naming the bound; nothing of either is left in the cache."""
    big = [images.Entry("zeros", data=bytes(64 << 20))]
    path = _given(home, "layout", images.Spec([images.busybox_layer(), big], cmd=["true"]))
    _refused(_run_image(home, path, as_root=as_root, args=("--image-limits", "size=8Mi")), "8 MiB", "--image-limits")
    many = [images.Entry(f"f{i}") for i in range(300)]
    path = _given(home, "layout", images.Spec([images.busybox_layer(), many], cmd=["true"]))
    _refused(_run_image(home, path, as_root=as_root, args=("--image-limits", "files=100")), "100 files")
    cache = _cache(home, as_root)
    assert not list(cache.glob("unpacked/*")), "nothing left unpacked"


@MODES
def test_a_sparse_file_of_10_gib_in_a_tiny_layer_stops_at_the_bound(home: Path, as_root: bool) -> None:
    """GNU tar's sparse format (PAX 1.0): a layer of a few KiB whose one file is 10 GiB of holes, which umoci (Go's
    archive/tar) writes densely. Past `size=64Mi` the file stops at the bound (RLIMIT_FSIZE): one line, at once, the
    disk never filled."""
    work = home / "sparse"
    work.mkdir()
    subprocess.run(["truncate", "-s", "10G", str(work / "holes")], check=True)
    layer = home / "sparse.tar"
    tar = ["tar", "--sparse", "--format=posix", "--owner=0", "--group=0", "-C", str(work), "-cf", str(layer), "holes"]
    subprocess.run(tar, check=True)
    assert layer.stat().st_size < 64 << 10
    layout = home / "layout"
    images.layout(layout, images.Spec([images.busybox_layer()], cmd=["true"]))
    path = _edited(layout, layer.read_bytes())
    subprocess.run(["chmod", "-R", "a+rX", str(layout)], check=True)
    free = os.statvfs(home).f_bavail
    start = time.monotonic()
    _refused(_run_image(home, path, as_root=as_root, args=("--image-limits", "size=64Mi")), "64 MiB")
    assert time.monotonic() - start < 30
    assert (free - os.statvfs(home).f_bavail) * os.statvfs(home).f_frsize < 1 << 30


@pytest.mark.unit
def test_bad_image_limits_are_named_all_at_once() -> None:
    from jaxinfra import simulate_flags
    from jaxinfra.errors import SpecError

    assert simulate_flags.image_limits(["size=1Gi,files=10", "cache=2Gi"]) == image_cache.Bounds(1 << 30, 10, 2 << 30)
    with pytest.raises(SpecError) as err:
        simulate_flags.image_limits(["size=lots,color=red", "files=-1"])
    assert [p.value for p in err.value.problems] == ["size=lots", "color=red", "files=-1"]


@pytest.mark.unit
def test_the_cache_is_pruned_least_recently_used_first(tmp_path: Path) -> None:
    """Past its bytes bound the oldest entries go first, never one in use; within it, none."""
    cache = image_cache.owned(tmp_path / "jaxinfra" / "images")
    entries = []
    for i, folder in enumerate(("unpacked", "archives", "unpacked", "unpacked")):
        entry = cache / folder / f"e{i}"
        entry.mkdir()
        (entry / "data").write_bytes(b"x" * (1 << 20))
        os.utime(entry, (1000 + i, 1000 + i))
        entries.append(entry)
    assert image_cache.prune(cache, image_cache.Bounds(cache_bytes=64 << 20), frozenset()) == []
    removed = image_cache.prune(cache, image_cache.Bounds(cache_bytes=(2 << 20) + 65536), frozenset({entries[0]}))
    assert removed == entries[1:3] and entries[0].exists() and entries[3].exists()


# --- configs containerd refuses -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("User", "²", "no user '²' in the image's /etc/passwd"),
        ("Env", ["A=x\x00y"], "its config's Env 'A=x\\x00y' holds a NUL byte"),
        ("Cmd", ["/bin/sh\x00"], "holds a NUL byte"),
        ("WorkingDir", "srv", "WorkingDir 'srv' is not an absolute path"),
    ],
)
def test_an_image_config_containerd_refuses_is_one_line_at_load(
    tmp_path: Path, field: str, value: object, why: str
) -> None:
    layout = tmp_path / "layout"
    images.layout(layout, images.Spec([images.busybox_layer()], cmd=["true"]))
    _edited(layout, **{field: value})
    with pytest.raises(oci_image.ImageError, match=None) as err:
        oci_image.load(NAME, layout, tmp_path / "cache" / "jaxinfra" / "images")
    assert why in str(err.value) and err.value.status == 2


# --- caches ---------------------------------------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="root's run into another user's folder")
def test_root_never_uses_a_cache_in_a_folder_another_user_owns(home: Path) -> None:
    """What `sudo -E` keeps: XDG_CACHE_HOME in the user's folder is refused with the fix, nothing made there; HOME
    alone is not followed (root's cache is in root's own home)."""
    path = _given(home, "layout", images.Spec([images.busybox_layer()], cmd=["true"]))
    cache = home / ".cache"
    env = {"XDG_CACHE_HOME": str(cache)}
    r = unprivileged.run(
        [*_argv_of(home, path)], home, as_root=True, env=env, cwd=unprivileged.ROOT, capture_output=True, text=True
    )
    _refused(r, f"folder {home} on the way is owned by uid {unprivileged.NOBODY}", "XDG_CACHE_HOME")
    assert not cache.exists()


@pytest.mark.unit
def test_the_default_cache_is_in_the_callers_own_home_whatever_home_says(monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", "/tmp/someone-else")
    assert image_cache.root() == Path(pwd.getpwuid(os.geteuid()).pw_dir) / ".cache" / "jaxinfra" / "images"


def _argv_of(home: Path, path: Path) -> list[str]:
    from tests.sim.runtime.test_images import _argv

    return _argv(home, "--image", f"{NAME}={path}")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a folder root made")
def test_a_user_given_a_cache_root_made_gets_the_fix_not_a_traceback(home: Path) -> None:
    """The other way round: a cache folder root made (0755), given to a user: the fix, exit 2."""
    path = _given(home, "layout", images.Spec([images.busybox_layer()], cmd=["true"]))
    made = Path(f"{home}-root")
    (made / "jaxinfra").mkdir(parents=True, mode=0o755)
    os.chmod(made, 0o755)
    r = unprivileged.run(
        _argv_of(home, path),
        home,
        env={"XDG_CACHE_HOME": str(made)},
        cwd=unprivileged.ROOT,
        capture_output=True,
        text=True,
    )
    _refused(r, "image cache", "is not a folder you own", "XDG_CACHE_HOME")


@pytest.mark.unit
def test_a_cache_folder_others_may_write_or_own_is_refused(tmp_path: Path) -> None:
    """Checked by descriptor along the way: a folder writable by others (not sticky), the cache's own folder owned by
    another user; a sticky one (as /tmp) above the caller's own is fine; made 0700."""
    ok = image_cache.owned(tmp_path / "a" / "jaxinfra" / "images")
    assert stat.S_IMODE(ok.stat().st_mode) == 0o700 and stat.S_IMODE(ok.parent.stat().st_mode) == 0o700
    os.chmod(ok, 0o755)  # the cache's own folders made 0700 again; the folders above, and one a link leads to, kept
    (tmp_path / "home").mkdir(mode=0o755)
    (tmp_path / "link").symlink_to(tmp_path / "home")
    assert image_cache.owned(tmp_path / "link" / "jaxinfra" / "images") == tmp_path / "link" / "jaxinfra" / "images"
    assert stat.S_IMODE((tmp_path / "home").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "home" / "jaxinfra").stat().st_mode) == 0o700
    image_cache.owned(tmp_path / "a" / "jaxinfra" / "images")
    assert stat.S_IMODE(ok.stat().st_mode) == 0o700
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    os.chmod(open_folder, 0o777)
    with pytest.raises(image_cache.CacheError, match="writable by others"):
        image_cache.owned(open_folder / "jaxinfra" / "images")
    os.chmod(open_folder, 0o1777)
    image_cache.owned(open_folder / "mine" / "jaxinfra" / "images")
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        (theirs / "jaxinfra").mkdir(parents=True)
        os.chown(theirs / "jaxinfra", unprivileged.NOBODY, unprivileged.NOBODY)
        with pytest.raises(image_cache.CacheError, match="not a folder root own"):
            image_cache.owned(theirs / "jaxinfra" / "images")


@pytest.mark.skipif(os.geteuid() != 0, reason="root's cache")
def test_roots_cache_holds_no_file_of_the_machines_root(tmp_path: Path) -> None:
    """A setuid-root program of the image is, in root's cache, owned by the containers' root (id_base), never the
    machine's: no user of this machine who reached it would get root from it."""
    suid = [images.Entry("bin/su-like", data=b"#!/bin/sh\n", mode=0o4755)]
    layout = tmp_path / "layout"
    images.layout(layout, images.Spec([images.busybox_layer(), suid], cmd=["true"]))
    image = oci_image.load(NAME, layout, tmp_path / "cache" / "jaxinfra" / "images")
    st = (image.rootfs / "bin" / "su-like").stat()
    assert st.st_mode & stat.S_ISUID and st.st_uid == confined.ids() != 0
    owners = {os.lstat(p).st_uid for p in image.rootfs.rglob("*")}
    assert 0 not in owners and image.shifted
