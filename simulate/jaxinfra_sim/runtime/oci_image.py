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
  with the image's owners, which each container sees through its id map; unprivileged `--rootless`, every file the
  caller's), into `<cache>/unpacked/<manifest digest>-<root|rootless>/rootfs`, shared read-only by every container
  of the image (each gets a writable overlay of its own, as containerd's overlayfs snapshotter gives it).
- Before umoci sees a layer, it is read here once (its digest checked as it is read): an entry naming a path above
  the root, written through a symlink that leads out of the root (absolute, or `..` past it), a hard link to such a
  path, a device node, or anything but a folder at `/dev`, `/proc` or `/sys` (where the runtime mounts the
  container's own) is refused with one line naming the image, the layer and the entry (`ImageError`, exit 2): a
  naive unpacker would write the machine's files, or give the container the machine's devices.

The cache (`$XDG_CACHE_HOME/jaxinfra/images`, else `~/.cache/jaxinfra/images`) is 0700: as root it holds the images'
files with their own owners and modes, setuid programs too, which no user of this machine may reach.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import re
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from jaxinfra.errors import INPUT_ERROR, CommandFailed
from jaxinfra_sim.core import programs
from jaxinfra_sim.core.errors import SimulatorError
from jaxinfra_sim.runtime.oci_layers import Links

LAYOUT_MARKER = "oci-layout"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
MANIFESTS = ("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json")
INDEXES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
LAYERS = {
    "application/vnd.oci.image.layer.v1.tar": "r|",
    "application/vnd.oci.image.layer.v1.tar+gzip": "r|gz",
    "application/vnd.docker.image.rootfs.diff.tar.gzip": "r|gz",
    "application/vnd.docker.image.rootfs.diff.tar": "r|",
}
"""The layer media types read here (and by umoci), each with how `tarfile` streams it."""
NAME_ANNOTATIONS = ("io.containerd.image.name", "org.opencontainers.image.ref.name")
TAG = "image"
"""The tag the simulator's own layouts (converted archives, the one umoci reads) give their image."""
JSON_LIMIT = 4 << 20
"""The most bytes of a layout's index, manifest or config read: more is no image this simulator takes."""
ARCHES = {"x86_64": "amd64", "aarch64": "arm64"}


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


def kind(path: Path) -> str | None:
    """ "layout" (an OCI image layout), "archive" (a tar file: docker/podman save), "folder" (today's plain folder,
    the image's top layer), or None (none of them)."""
    if path.is_dir():
        return "layout" if (path / LAYOUT_MARKER).is_file() and (path / "index.json").is_file() else "folder"
    if path.is_file() and tarfile.is_tarfile(path):
        return "archive"
    return None


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path(os.environ.get("HOME") or tempfile.gettempdir()) / ".cache")
    return Path(base) / "jaxinfra" / "images"


def load(name: str, source: Path, cache: Path | None = None) -> Image:
    """The image `name` from `source` (a layout or an archive: `kind`), unpacked in `cache` (`cache_root`) unless it
    is there already. `ImageError` for an image refused; `Unavailable` (exit 3) without umoci or skopeo."""
    cache = cache or cache_root()
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(cache, 0o700)
    layout = _converted(name, source, cache) if kind(source) == "archive" else source
    image = _Layout(name, source, layout).unpack(cache)
    if image.config.user and isinstance(why := user_ids(image.rootfs, image.config.user), str):
        raise ImageError(name, source, f"its User {image.config.user!r}: {why}", "fix the image's USER")
    return image


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _member(tar: tarfile.TarFile, name: str) -> object:
    """The JSON document `name` at the top of an archive, as `name` or `./name` (None where it is missing, too large
    or not JSON)."""
    try:
        member = next((m for m in tar if m.name in (name, f"./{name}")), None)
        if member is None:
            return None
        data = tar.extractfile(member) if member.isfile() and member.size <= JSON_LIMIT else None
        return json.loads(data.read()) if data is not None else None
    except (KeyError, OSError, tarfile.TarError, ValueError):
        return None


def _archive_source(name: str, source: Path) -> tuple[str, str]:
    """skopeo's transport for a save archive and which of its images: `docker-archive` (a manifest.json list, as
    `docker save` and `podman save` write; `:@N`, the one whose RepoTags name `name`, where it holds several), else
    `oci-archive` (an OCI image layout as one tar, as `docker buildx build --output type=oci` and `podman save
    --format oci-archive` write; `:REF`, the image whose org.opencontainers.image.ref.name is `name` or its tag,
    which is how skopeo's oci-archive transport picks one, where it holds several); "" for its only image."""
    try:
        with tarfile.open(source, "r:") as tar:
            entries, index = _member(tar, "manifest.json"), _member(tar, "index.json")
    except (OSError, tarfile.TarError):
        entries = index = None
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


def _converted(name: str, source: Path, cache: Path) -> Path:
    """A save archive as an OCI layout (skopeo), in the cache by the archive's sha256."""
    transport, which = _archive_source(name, source)
    target = cache / "archives" / _sha256(source)
    if (target / "index.json").is_file():
        return target
    skopeo = programs.required("skopeo")
    target.parent.mkdir(exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        link = Path(tmp) / "source.tar"  # skopeo splits its reference at ':': a name of ours, never the user's
        link.symlink_to(source.resolve())
        layout = Path(tmp) / "layout"
        done = subprocess.run(
            [
                skopeo,
                "--tmpdir",  # where it unpacks an OCI archive: never this machine's /var/tmp (containers/image
                tmp,  # internal/tmpdir/tmpdir.go TemporaryDirectoryForBigFiles, unless BigFilesTemporaryDir is set)
                "copy",
                "--quiet",
                "--dest-compress-level",  # skopeo gzips docker save's layers for the layout: the fastest level
                "1",  # (its uncompressed layers are labelled gzip by skopeo 1.9, which umoci cannot read)
                f"{transport}:{link}{which}",
                f"oci:{layout}:{TAG}",
            ],
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
            env=skopeo_env(Path(tmp)),
        )
        if done.returncode != 0:
            raise ImageError(
                name,
                source,
                f"skopeo could not read it: {_last(done.stderr)}",
                "give the file `docker save` or `podman save` wrote",
            )
        with contextlib.suppress(OSError):  # another simulation converted it meanwhile: the same bytes
            layout.rename(target)
    return target


def skopeo_env(scratch: Path) -> dict[str, str]:
    """skopeo's environment: its blob-info cache in `scratch`, never in this machine's /var/lib/containers (where
    containers/image puts root's: pkg/blobinfocache/default.go blobInfoCacheDir, which takes a user's from
    XDG_DATA_HOME, and takes the caller as a user where containers/storage's pkg/unshare says so,
    _CONTAINERS_ROOTLESS_UID) or the caller's home."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(scratch),
        "XDG_DATA_HOME": str(scratch),
        "_CONTAINERS_ROOTLESS_UID": str(os.getuid() or 1),
    }


def _last(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no message"


class _Hashed:
    """A blob's stream that hashes what is read from it."""

    def __init__(self, f: IO[bytes]):
        self.f, self.h = f, hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.h.update(data)
        return data

    def drain(self) -> str:
        while self.read(1 << 20):
            pass
        return "sha256:" + self.h.hexdigest()


class _Layout:
    """One OCI image layout, read as hostile input: every blob named by a checked digest and opened beneath the
    layout's `blobs/sha256` without following a symlink, every JSON document bounded and type-checked."""

    def __init__(self, name: str, source: Path, path: Path):
        self.name, self.source, self.path = name, source, path
        self.blobs = path / "blobs" / "sha256"

    def fail(self, what: str, fix: str = "rebuild the image; a container runtime refuses it as it is") -> ImageError:
        return ImageError(self.name, self.source, what, fix)

    @contextlib.contextmanager
    def blob(self, digest: object) -> Iterator[IO[bytes]]:
        if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
            raise self.fail(f"a descriptor's digest {digest!r} is not a sha256 digest")
        try:
            top = os.open(self.blobs, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                fd = os.open(digest[7:], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=top)
            finally:
                os.close(top)
        except OSError as err:
            raise self.fail(f"blob {digest} cannot be read: {err.strerror}", "give a complete image layout") from None
        with os.fdopen(fd, "rb") as f:
            yield f

    def document(self, digest: object, what: str) -> dict[str, Any]:
        with self.blob(digest) as f:
            data = f.read(JSON_LIMIT + 1)
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
        try:
            with open(self.path / "index.json", "rb") as f:
                data = f.read(JSON_LIMIT + 1)
        except OSError as err:
            raise self.fail(f"index.json cannot be read: {err.strerror}", "give an OCI image layout folder") from None
        return self._json(data[: JSON_LIMIT + 1], "index.json")

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
        described = manifest.get("config")
        document = self.document(described.get("digest") if isinstance(described, dict) else None, "config")
        c = document.get("config") or {}
        if not isinstance(c, dict):
            raise self.fail("its config's `config` is not an object")

        def strings(key: str) -> tuple[str, ...]:
            value = c.get(key)
            if value is None:
                return ()
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise self.fail(f"its config's {key} is not a list of strings")
            return tuple(value)

        def text(key: str) -> str:
            value = c.get(key) or ""
            if not isinstance(value, str):
                raise self.fail(f"its config's {key} is not a string")
            return value

        env = tuple((k, v) for k, sep, v in (e.partition("=") for e in strings("Env")) if sep and k)
        return Config(strings("Entrypoint"), strings("Cmd"), text("WorkingDir"), env, text("User"))

    def layers(self, manifest: dict[str, Any]) -> list[tuple[str, str]]:
        out = []
        for layer in manifest.get("layers") or ():
            media = layer.get("mediaType") if isinstance(layer, dict) else None
            if media not in LAYERS:
                raise self.fail(
                    f"a layer's media type {media!r} is not one umoci unpacks here",
                    "save the image with gzip or uncompressed layers (skopeo copy --dest-compress-format gzip)",
                )
            out.append((layer["digest"], str(media)))
        return out

    def unpack(self, cache: Path) -> Image:
        digest, manifest = self.manifest()
        config = self.config(manifest)
        rootless = os.geteuid() != 0
        target = cache / "unpacked" / f"{digest[7:]}-{'rootless' if rootless else 'root'}"
        if (target / "rootfs").is_dir():
            return Image(self.name, self.source, digest, target / "rootfs", config, cached=True)
        layers = self.layers(manifest)
        links = Links()
        for layer, media in layers:  # every layer read before any is unpacked
            self.scan(layer, media, links)
        target.parent.mkdir(exist_ok=True, mode=0o700)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            staging = Path(tmp)
            shadow = staging / "layout"  # the one manifest, tagged for umoci, over the source's own blobs
            shadow.mkdir()
            (shadow / LAYOUT_MARKER).write_text('{"imageLayoutVersion":"1.0.0"}', encoding="utf-8")
            with self.blob(digest) as f:
                size = len(f.read(JSON_LIMIT + 1))
            annotations = {"org.opencontainers.image.ref.name": TAG}
            entry = {
                "mediaType": manifest.get("mediaType", MANIFESTS[0]),
                "digest": digest,
                "size": size,
                "annotations": annotations,
            }
            (shadow / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [entry]}))
            (shadow / "blobs").symlink_to((self.path / "blobs").resolve())
            out = staging / "unpacked"
            out.mkdir()
            argv = [
                programs.required("umoci"),
                "raw",
                "unpack",
                *(["--rootless"] if rootless else []),
                "--image",
                f"{shadow}:{TAG}",
                str(out / "rootfs"),
            ]
            done = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                raise self.fail(f"umoci could not unpack it: {_last(done.stderr)}")
            (out / "config.json").write_text(json.dumps(dataclasses.asdict(config), sort_keys=True))
            with contextlib.suppress(OSError):  # unpacked meanwhile by another simulation: the same files
                out.rename(target)
        return Image(self.name, self.source, digest, target / "rootfs", config)

    def scan(self, digest: str, media: str, links: Links) -> None:
        """Refuse the layer's first unsafe entry (see the module's docstring); `links`: the symlinks the layers
        below left, updated with this layer's."""
        with self.blob(digest) as f:
            stream = _Hashed(f)
            try:
                with tarfile.open(fileobj=stream, mode=LAYERS[media]) as tar:  # type: ignore[call-overload]
                    for member in tar:
                        why = links.check(member)
                        if why is not None:
                            raise self.fail(
                                f"layer {digest[:19]} entry {member.name!r} {why}",
                                "rebuild the image without that entry",
                            )
            except (tarfile.TarError, OSError, EOFError) as err:
                raise self.fail(f"layer {digest[:19]} is not a readable tar stream ({err})") from None
            if stream.drain() != digest:
                raise self.fail(f"layer {digest[:19]} does not match its digest")


def user_ids(rootfs: Path, user: str) -> tuple[int, int] | str:
    """The (uid, gid) an image's `User` names, read from its own /etc/passwd and /etc/group as containerd's
    `oci.WithUser` reads them (containerd @ 18fcad83 pkg/oci/spec_opts.go): `uid`, `name`, `uid:gid`, `name:group`;
    a uid the passwd file lacks runs with gid 0. Why not, as text, when a name is not in the image."""
    name, _, group = user.partition(":")
    passwd = _entries(rootfs, "etc/passwd")
    uid: int | None = int(name) if name.isdigit() else None
    gid: int | None = None
    for fields in passwd:
        if len(fields) >= 4 and fields[2].isdigit() and fields[3].isdigit():
            if (uid is None and fields[0] == name) or (uid is not None and int(fields[2]) == uid):
                uid, gid = int(fields[2]), int(fields[3])
                break
    if uid is None:
        return f"no user {name!r} in the image's /etc/passwd"
    if group:
        if group.isdigit():
            gid = int(group)
        else:
            gid = next(
                (int(f[2]) for f in _entries(rootfs, "etc/group") if len(f) >= 3 and f[0] == group and f[2].isdigit()),
                None,
            )
            if gid is None:
                return f"no group {group!r} in the image's /etc/group"
    return uid, gid or 0


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
