"""Container images as a node has them: an OCI image layout or a `docker save` archive, unpacked once into a cache
by its manifest's digest, with its config (Entrypoint, Cmd, WorkingDir, Env, User) read for the kubelet's and
containerd's rules (`image_config.py` applies it).

- An OCI image layout (image-spec `image-layout.md`: `oci-layout`, `index.json`, `blobs/sha256/...`), as
  `skopeo copy ... oci:DIR` and `docker buildx build --output type=oci,tar=false` write it. One image of it is used:
  its only one, else the one whose `io.containerd.image.name` or `org.opencontainers.image.ref.name` is the image's
  name (or tag) as the manifest writes it; an image index is followed to this machine's linux platform.
- A `docker save` / `podman save` archive, or an OCI image layout as one tar (`docker buildx build --output
  type=oci`), converted to a layout by skopeo (`skopeo copy docker-archive:FILE` or `oci-archive:FILE`, to
  `oci:DIR:image`, offline), kept in the cache by the archive's own sha256.
- Its layers are unpacked by umoci (`umoci raw unpack`: the OCI image spec's whiteouts, hard links, modes; as root
  with the image's owners as the containers' ids; unprivileged `--rootless`, every file the caller's), into
  `<cache>/unpacked/<manifest digest>-<ids<id_base>|rootless>/rootfs`, shared read-only by every container of the
  image (each gets a writable overlay of its own, as containerd's overlayfs snapshotter gives it).
- skopeo and umoci run confined (`confined`: their own namespaces, nothing of the machine but the machine's programs
  read-only, the image read-only and one output folder, no network, bounded in bytes, files and time): nothing of an
  image touches the machine before it is checked. As root they run as the containers' ids (id_base + N), so the
  cache holds no file of the machine's root: setuid programs and file capabilities hold inside the containers only.
  umoci checks each blob's digest and size as it reads it, writes every entry inside its output (a symlink or hard
  link aimed out of it resolves in it, as containerd's `archive.Apply` resolves it: an image a cluster runs), and
  in a user namespace makes an empty file where a layer has a device node (umoci's rootless unpack).
- The unpacked tree is then checked by descriptor, never by a second reading of the layers: a device node anywhere,
  or anything but a folder at `/dev`, `/proc` or `/sys` (where the runtime mounts the container's own), is refused
  with one line naming the image and the entry (`ImageError`, exit 2); so are an image past its bounds
  (`image_cache.Bounds`) and an image config containerd or runc refuses (`config`).
- Every file of the image is opened without following a link and without blocking (a FIFO or a device is refused,
  never waited on); an archive's headers are read by `tar_headers` (bounded, Go's rules), never by Python's tarfile.

The cache is the caller's own and bounded (`image_cache`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import re
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxinfra.errors import INPUT_ERROR, CommandFailed
from jaxinfra_sim.core import programs, trees
from jaxinfra_sim.core.errors import SimulatorError
from jaxinfra_sim.runtime import confined, image_cache, tar_headers

LAYOUT_MARKER = "oci-layout"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
MANIFESTS = ("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json")
INDEXES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
LAYERS = (
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.diff.tar",
)
"""The layer media types umoci unpacks."""
NAME_ANNOTATIONS = ("io.containerd.image.name", "org.opencontainers.image.ref.name")
TAG = "image"
"""The tag the simulator's own layouts (converted archives, the one umoci reads) give their image."""
JSON_LIMIT = 4 << 20
"""The most bytes of a layout's index, manifest or config read: more is no image this simulator takes."""
ARCHES = {"x86_64": "amd64", "aarch64": "arm64"}
RUNTIME_MOUNTS = ("dev", "proc", "sys")
"""Top-level folders the runtime mounts the container's own filesystems on: a link there would be followed on this
machine while the root is built."""
OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""How every file of an image is opened: never through a link, never waiting on a FIFO or a device."""


class ImageError(SimulatorError, CommandFailed):
    """An image given to --image that the simulator will not use as it is: one line naming it, what is wrong and the
    fix (exit status 2: the input's fault)."""

    def __init__(self, name: str, source: Path, what: str, fix: str):
        super().__init__(f"image {name} ({source}): {what}; fix: {fix}", INPUT_ERROR)
        self.what = what


@dataclass(frozen=True)
class Config:
    """The image config's process defaults (image-spec `config.md`: `config.Entrypoint`, `Cmd`, ...)."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    working_dir: str = ""
    env: tuple[tuple[str, str], ...] = ()
    user: str = ""


@dataclass(frozen=True)
class Image:
    """An image unpacked in the cache: what the containers of `name` (as the manifests write it) run from."""

    name: str
    source: Path  # the layout or archive it was given as
    digest: str  # its manifest's
    rootfs: Path  # its layers unpacked: every container's read-only lower layer
    config: Config
    cached: bool = False  # found unpacked already (this load unpacked nothing)
    shifted: bool = False  # its owners are the containers' ids already (root's: `confined`), seen through no idmap


def kind(path: Path) -> str | None:
    """ "layout" (an OCI image layout), "archive" (a tar file: docker/podman save), "folder" (today's plain folder,
    the image's top layer), or None (none of them: a FIFO, a device, a file that is no tar). Read without blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            found = {n: _regular(n, fd) for n in (LAYOUT_MARKER, "index.json")}
            return "layout" if all(found.values()) else "folder"
        return "archive" if stat.S_ISREG(mode) and tar_headers.is_tar(os.pread(fd, 512, 0)) else None
    finally:
        os.close(fd)


def _regular(name: str, folder: int) -> bool:
    with contextlib.suppress(OSError):
        return stat.S_ISREG(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    return False


def load(name: str, source: Path, cache: Path | None = None, bounds: image_cache.Bounds | None = None) -> Image:
    """The image `name` from `source` (a layout or an archive: `kind`), unpacked in `cache` (`image_cache.root`, the
    caller's own: `image_cache.owned`) unless it is there already, within `bounds`. `ImageError` for an image refused,
    `image_cache.CacheError` for a cache refused; `Unavailable` (exit 3) without umoci, skopeo or bwrap."""
    cache = image_cache.owned(cache or image_cache.root())
    bounds = (bounds or image_cache.Bounds()).resolved(cache)
    archive = kind(source) == "archive"
    layout = _converted(name, source, cache, bounds) if archive else source
    image = _Layout(name, source, layout).unpack(cache, bounds)
    if image.config.user and isinstance(why := user_ids(image.rootfs, image.config.user), str):
        raise ImageError(name, source, f"its User {image.config.user!r}: {why}", "fix the image's USER")
    image_cache.prune(cache, bounds, keep=frozenset({image.rootfs.parent, *([layout] if archive else [])}))
    return image


@contextlib.contextmanager
def _opened(name: str, source: Path, flags: int, fix: str) -> Iterator[int]:
    """`source` opened (`flags`), or the one line saying why not."""
    try:
        fd = os.open(source, flags)
    except OSError as err:
        raise ImageError(name, source, f"cannot be opened ({err.strerror})", fix) from None
    try:
        yield fd
    finally:
        os.close(fd)


def _sha256(fd: int) -> str:
    h = hashlib.sha256()
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        h.update(chunk)
        offset += len(chunk)
    return h.hexdigest()


def _archive_source(name: str, source: Path, fd: int) -> tuple[str, str]:
    """skopeo's transport for a save archive and which of its images: `docker-archive` (a manifest.json list, as
    `docker save` and `podman save` write; `:@N`, the one whose RepoTags name `name`, where it holds several), else
    `oci-archive` (an OCI image layout as one tar, as `docker buildx build --output type=oci` and `podman save
    --format oci-archive` write; `:REF`, the image whose org.opencontainers.image.ref.name is `name` or its tag,
    which is how skopeo's oci-archive transport picks one, where it holds several); "" for its only image."""
    try:
        found = tar_headers.documents(fd, ("manifest.json", "index.json"), JSON_LIMIT)
    except tar_headers.TarError as err:
        raise ImageError(name, source, f"not a tar file Go's archive/tar reads: {err}", _SAVED) from None
    entries, index = (_loads(found.get(n)) for n in ("manifest.json", "index.json"))
    if isinstance(entries, list) and entries:
        if len(entries) == 1:
            return "docker-archive", ""
        for i, entry in enumerate(entries):
            if isinstance(entry, dict) and name in (entry.get("RepoTags") or ()):
                return "docker-archive", f":@{i}"
        raise ImageError(
            name,
            source,
            f"the archive holds {len(entries)} images and none is tagged {name}",
            f"save {name} alone, or tag it so in the archive",
        )
    manifests = index.get("manifests") if isinstance(index, dict) else None
    if not isinstance(manifests, list) or not manifests:
        raise ImageError(
            name,
            source,
            "neither a `docker save` archive (no manifest.json list in it) nor an OCI image layout archive (no "
            "index.json listing an image)",
            "give the file `docker save` or `podman save` wrote, an OCI archive, or an OCI image layout folder",
        )
    if len(manifests) == 1:
        return "oci-archive", ""
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
    refs = [
        ref
        for m in manifests
        if isinstance(m, dict)
        and isinstance(m.get("annotations"), dict)
        and isinstance(ref := m["annotations"].get("org.opencontainers.image.ref.name"), str)
        and ref in (name, tag)
    ]
    if len(refs) != 1 or not re.fullmatch(r"[A-Za-z0-9._:/@-]+", refs[0]):
        raise ImageError(
            name,
            source,
            f"the OCI archive holds {len(manifests)} images and {len(refs)} of them are named {name}",
            f"give an archive of {name} alone, or one whose index names it (org.opencontainers.image.ref.name)",
        )
    return "oci-archive", f":{refs[0]}"


_SAVED = "give the file `docker save` or `podman save` wrote"


def _loads(data: bytes | None) -> object:
    try:
        return json.loads(data) if data is not None else None
    except ValueError:
        return None


def _converted(name: str, source: Path, cache: Path, bounds: image_cache.Bounds) -> Path:
    """A save archive as an OCI layout (skopeo, confined), in the cache by the archive's sha256."""
    with _opened(name, source, OPEN, _SAVED) as fd:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ImageError(name, source, "not a regular file", _SAVED)
        transport, which = _archive_source(name, source, fd)
        target = cache / "archives" / _sha256(fd)
        if (target / "index.json").is_file():
            image_cache.touch(target)
            return target
        skopeo = programs.required("skopeo")
        with _staging(target.parent) as (staging, out):
            argv = [
                skopeo,
                "--insecure-policy",  # no signature to check offline: the default policy.json's insecureAcceptAnything
                "--tmpdir",  # where it unpacks an OCI archive: its output folder, bounded with it (containers/image
                "/out",  # internal/tmpdir/tmpdir.go TemporaryDirectoryForBigFiles)
                "copy",
                "--quiet",
                "--dest-compress-level",  # skopeo gzips docker save's layers for the layout: the fastest level
                "1",  # (its uncompressed layers are labelled gzip by skopeo 1.9, which umoci cannot read)
                f"{transport}:/source.tar{which}",
                f"oci:/out/layout:{TAG}",
            ]
            confined.own(out)
            _confined(name, source, argv, {"/source.tar": fd}, out, bounds, "skopeo could not read it", _SAVED)
            image_cache.record(staging / "layout", trees.usage(staging / "layout"))
            with contextlib.suppress(OSError):  # another simulation converted it meanwhile: the same bytes
                (staging / "layout").rename(target)
    return target


@contextlib.contextmanager
def _staging(parent: Path) -> Iterator[tuple[Path, int]]:
    """A fresh folder in the cache (removed afterwards, whatever is left in it) and a descriptor of it."""
    staging = Path(tempfile.mkdtemp(prefix="tmp", dir=parent))
    try:
        fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            yield staging, fd
        finally:
            os.close(fd)
    finally:
        trees.remove_tree(staging)


def _confined(
    name: str,
    source: Path,
    argv: list[str],
    reads: dict[str, int],
    out: int,
    bounds: image_cache.Bounds,
    failed: str,
    fix: str,
) -> None:
    limits = confined.Limits(bounds.image_limit, bounds.image_files, bounds.seconds)
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "XDG_DATA_HOME": "/tmp", "_CONTAINERS_ROOTLESS_UID": "1"}
    try:
        done = confined.run(argv, reads, ("/out", out), env, limits)
    except confined.Exceeded as err:
        raise ImageError(name, source, err.what, _SMALLER) from None
    if done.returncode != 0 and "file too large" in done.stderr:  # RLIMIT_FSIZE: one file past the bound
        raise ImageError(name, source, f"a file of it takes more than {limits.bytes >> 20} MiB unpacked", _SMALLER)
    if done.returncode != 0:
        raise ImageError(name, source, f"{failed}: {_last(done.stderr)}", fix)


def _last(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no message"


class _Layout:
    """One OCI image layout, read as hostile input: every file opened beneath the layout's folder (a descriptor)
    without following a link or blocking, every blob named by a checked digest, every JSON document bounded and
    type-checked."""

    def __init__(self, name: str, source: Path, path: Path):
        self.name, self.source, self.path = name, source, path

    def fail(self, what: str, fix: str = "rebuild the image; a container runtime refuses it as it is") -> ImageError:
        return ImageError(self.name, self.source, what, fix)

    @contextlib.contextmanager
    def folder(self, *parts: str) -> Iterator[int]:
        """The layout's folder (or one beneath it, reached without following a link), as a descriptor."""
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags)
            for part in parts:
                nxt = os.open(part, flags | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except OSError as err:
            where = "/".join(parts) or "the layout"
            raise self.fail(f"{where} cannot be opened ({err.strerror})", _COMPLETE) from None
        try:
            yield fd
        finally:
            os.close(fd)

    def read(self, name: str, *parts: str) -> bytes:
        """A regular file of the layout, at most `JSON_LIMIT` + 1 bytes."""
        with self.folder(*parts) as top:
            try:
                fd = os.open(name, OPEN, dir_fd=top)
            except OSError as err:
                raise self.fail(f"{name} cannot be read: {err.strerror}", _COMPLETE) from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise self.fail(f"{name} is not a regular file", _COMPLETE)
            return f.read(JSON_LIMIT + 1)

    def document(self, digest: object, what: str) -> dict[str, Any]:
        if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
            raise self.fail(f"a descriptor's digest {digest!r} is not a sha256 digest")
        data = self.read(digest[7:], "blobs", "sha256")
        if len(data) > JSON_LIMIT or "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            raise self.fail(f"its {what} {digest} does not match its digest")
        return self._json(data, what)

    def _json(self, data: bytes, what: str) -> dict[str, Any]:
        try:
            found = json.loads(data)
        except ValueError:
            found = None
        if not isinstance(found, dict):
            raise self.fail(f"its {what} is not a JSON object")
        return found

    def index(self) -> dict[str, Any]:
        return self._json(self.read("index.json"), "index.json")

    def manifest(self) -> tuple[str, dict[str, Any]]:
        """(digest, manifest) of the image named `name`, through an image index to this machine's platform."""
        chosen = self._choose(self.index().get("manifests"), top=True)
        for _ in range(2):
            media = chosen.get("mediaType")
            if media in MANIFESTS:
                return chosen["digest"], self.document(chosen["digest"], "manifest")
            if media not in INDEXES:
                break
            chosen = self._choose(self.document(chosen["digest"], "image index").get("manifests"), top=False)
        raise self.fail(f"no image manifest found (media type {chosen.get('mediaType')!r})")

    def _choose(self, manifests: object, top: bool) -> dict[str, Any]:
        found = [m for m in manifests if isinstance(m, dict)] if isinstance(manifests, list) else []
        if not top:
            arch = ARCHES.get(platform.machine(), platform.machine())
            found = [
                m
                for m in found
                if isinstance(m.get("platform"), dict)
                and (m["platform"].get("os"), m["platform"].get("architecture")) == ("linux", arch)
            ] or found[:0]
            if not found:
                raise self.fail(f"its image index has no linux/{arch} image", f"give an image built for linux/{arch}")
            return found[0]
        if len(found) == 1:
            return found[0]
        tag = self.name.rsplit(":", 1)[1] if ":" in self.name.rsplit("/", 1)[-1] else "latest"
        named = [
            m
            for m in found
            if isinstance(m.get("annotations"), dict)
            and any(m["annotations"].get(k) in (self.name, tag) for k in NAME_ANNOTATIONS)
        ]
        if len(named) != 1:
            raise self.fail(
                f"the layout holds {len(found)} images and {len(named)} of them are named {self.name}",
                f"give a layout of {self.name} alone, or one whose index names it",
            )
        return named[0]

    def config(self, manifest: dict[str, Any]) -> Config:
        """The config's process defaults, each refused (the field named) where containerd or runc would refuse it:
        a string with a NUL byte (no exec(2) takes one), a WorkingDir that is not absolute (runc's `validateSpec`:
        "Cwd must be an absolute path")."""
        described = manifest.get("config")
        document = self.document(described.get("digest") if isinstance(described, dict) else None, "config")
        c = document.get("config") or {}
        if not isinstance(c, dict):
            raise self.fail("its config's `config` is not an object")

        def checked(key: str, value: str) -> str:
            if "\0" in value:
                raise self.fail(f"its config's {key} {value!r} holds a NUL byte", "fix the image's config")
            return value

        def strings(key: str) -> tuple[str, ...]:
            value = c.get(key)
            if value is None:
                return ()
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise self.fail(f"its config's {key} is not a list of strings")
            return tuple(checked(key, v) for v in value)

        def text(key: str) -> str:
            value = c.get(key) or ""
            if not isinstance(value, str):
                raise self.fail(f"its config's {key} is not a string")
            return checked(key, value)

        env = tuple((k, v) for k, sep, v in (e.partition("=") for e in strings("Env")) if sep and k)
        working_dir = text("WorkingDir")
        if working_dir and not working_dir.startswith("/"):
            raise self.fail(
                f"its config's WorkingDir {working_dir!r} is not an absolute path (runc: Cwd must be absolute)",
                "set WORKDIR to an absolute path",
            )
        return Config(strings("Entrypoint"), strings("Cmd"), working_dir, env, text("User"))

    def layers(self, manifest: dict[str, Any]) -> None:
        """Every layer one umoci unpacks, its blob a regular file of the layout (a FIFO or a device would hold umoci
        until its time bound; a link is refused as every blob here is)."""
        with self.folder("blobs", "sha256") as blobs:
            for layer in manifest.get("layers") or ():
                media = layer.get("mediaType") if isinstance(layer, dict) else None
                if media not in LAYERS:
                    raise self.fail(
                        f"a layer's media type {media!r} is not one umoci unpacks here",
                        "save the image with gzip or uncompressed layers (skopeo copy --dest-compress-format gzip)",
                    )
                digest = layer.get("digest")
                if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
                    raise self.fail(f"a layer's digest {digest!r} is not a sha256 digest")
                try:
                    regular = stat.S_ISREG(os.stat(digest[7:], dir_fd=blobs, follow_symlinks=False).st_mode)
                except OSError as err:
                    raise self.fail(f"blob {digest} cannot be read: {err.strerror}", _COMPLETE) from None
                if not regular:
                    raise self.fail(f"blob {digest} is not a regular file", _COMPLETE)

    def unpack(self, cache: Path, bounds: image_cache.Bounds) -> Image:
        digest, manifest = self.manifest()
        config = self.config(manifest)
        base = confined.ids()
        target = cache / "unpacked" / f"{digest[7:]}-{'rootless' if base is None else f'ids{base}'}"
        shifted = base is not None
        if (target / "rootfs").is_dir():
            image_cache.touch(target)
            return Image(self.name, self.source, digest, target / "rootfs", config, cached=True, shifted=shifted)
        self.layers(manifest)
        size = len(self.read(digest[7:], "blobs", "sha256"))
        umoci = programs.required("umoci")
        with _staging(target.parent) as (staging, _), self.folder("blobs") as blobs:
            shadow = staging / "layout"  # the one manifest, tagged for umoci, over the source's own blobs
            (shadow / "blobs").mkdir(parents=True)
            (shadow / LAYOUT_MARKER).write_text('{"imageLayoutVersion":"1.0.0"}', encoding="utf-8")
            annotations = {"org.opencontainers.image.ref.name": TAG}
            media = manifest.get("mediaType", MANIFESTS[0])
            entry = {"mediaType": media, "digest": digest, "size": size, "annotations": annotations}
            (shadow / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [entry]}))
            done = staging / "unpacked"
            done.mkdir()
            with _descriptor(shadow) as layout, _descriptor(done) as into:
                confined.own(into)
                rootless = [] if shifted else ["--rootless"]  # as root: the image's owners, as the containers' ids
                argv = [umoci, "raw", "unpack", *rootless, "--image", f"/layout:{TAG}", "/out/rootfs"]
                reads = {"/layout": layout, "/layout/blobs": blobs}
                _confined(self.name, self.source, argv, reads, into, bounds, "umoci could not unpack it", _REBUILD)
            image_cache.record(done, self.check(done / "rootfs", bounds))
            (done / "config.json").write_text(json.dumps(dataclasses.asdict(config), sort_keys=True))
            with contextlib.suppress(OSError):  # unpacked meanwhile by another simulation: the same files
                done.rename(target)
        return Image(self.name, self.source, digest, target / "rootfs", config, shifted=shifted)

    def check(self, rootfs: Path, bounds: image_cache.Bounds) -> int:
        """The unpacked tree, read by descriptor: no device node, a folder (or nothing) at each runtime mount, its
        size within `bounds` (counted exactly, after the confined run's own bound); its bytes on disk."""
        with _descriptor(rootfs) as top:
            for name in RUNTIME_MOUNTS:
                with contextlib.suppress(FileNotFoundError):
                    if not stat.S_ISDIR(os.stat(name, dir_fd=top, follow_symlinks=False).st_mode):
                        raise self.fail(
                            f"entry {name!r} is not a folder, where the runtime mounts the container's own /{name}",
                            _REBUILD_WITHOUT,
                        )
        total, count = 0, 0
        for folder, dirs, files, fd in os.fwalk(rootfs, follow_symlinks=False):
            for name in (*dirs, *files):
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                    where = os.path.relpath(os.path.join(folder, name), rootfs)
                    raise self.fail(f"entry {where!r} is a device node, which would be the machine's", _REBUILD_WITHOUT)
                total, count = total + st.st_blocks * 512, count + 1
        limit = bounds.image_limit
        if total > max(limit, 0) or count > bounds.image_files:
            raise ImageError(
                self.name,
                self.source,
                f"it takes {total >> 20} MiB in {count} files unpacked (at most {limit >> 20} MiB, "
                f"{bounds.image_files} files)",
                _SMALLER,
            )
        return total


_COMPLETE = "give a complete image layout"
_SMALLER = "give a smaller image, or raise --image-limits"
_REBUILD = "rebuild the image; a container runtime refuses it as it is"
_REBUILD_WITHOUT = "rebuild the image without that entry"


@contextlib.contextmanager
def _descriptor(folder: Path) -> Iterator[int]:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def user_ids(rootfs: Path, user: str) -> tuple[int, int] | str:
    """The (uid, gid) an image's `User` names, read from its own /etc/passwd and /etc/group as containerd's
    `oci.WithUser` reads them (containerd @ 18fcad83 pkg/oci/spec_opts.go): `uid`, `name`, `uid:gid`, `name:group`;
    a uid the passwd file lacks runs with gid 0. Why not, as text, when a name is not in the image."""
    name, _, group = user.partition(":")
    passwd = _entries(rootfs, "etc/passwd")
    uid: int | None = int(name) if _ID.fullmatch(name) else None
    gid: int | None = None
    for fields in passwd:
        if _numeric(fields, 2) and _numeric(fields, 3):
            if (uid is None and fields[0] == name) or (uid is not None and int(fields[2]) == uid):
                uid, gid = int(fields[2]), int(fields[3])
                break
    if uid is None:
        return f"no user {name!r} in the image's /etc/passwd"
    if group:
        if _ID.fullmatch(group):
            gid = int(group)
        else:
            gid = next(
                (
                    int(f[2])
                    for f in _entries(rootfs, "etc/group")
                    if len(f) >= 3 and f[0] == group and _ID.fullmatch(f[2])
                ),
                None,
            )
            if gid is None:
                return f"no group {group!r} in the image's /etc/group"
    return uid, gid or 0


_ID = re.compile(r"[0-9]{1,10}")
"""A numeric uid or gid as containerd parses one (strconv: ASCII digits only, so "²" is a name)."""


def _numeric(fields: list[str], at: int) -> bool:
    return len(fields) > at and _ID.fullmatch(fields[at]) is not None


def _entries(rootfs: Path, relative: str) -> list[list[str]]:
    """The lines of an image's own file, split at ':' (read inside its root: a symlink there resolves in it)."""
    from jaxinfra_sim.runtime.rootfs import join

    try:
        fd = os.open(join(rootfs, relative), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            data = f.read(JSON_LIMIT)
    except OSError:
        return []
    return [line.split(":") for line in data.decode("utf-8", "replace").splitlines()]
