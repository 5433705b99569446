"""Small container images built offline for the tests: an OCI image layout written by hand (image-spec
`image-layout.md`: `oci-layout`, `index.json`, `blobs/sha256/<hex>`; a manifest, a config, gzip layers) from Debian's
`busybox-static` (/bin/busybox), and a `docker save` archive of it made by skopeo (`skopeo copy oci:DIR
docker-archive:FILE`). A layer is a list of `Entry`s, so a test can write a hostile one (a symlink out of the root,
a device node) exactly as an attacker's image would carry it."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

BUSYBOX = Path("/bin/busybox")
SPMD_MNIST = Path(__file__).parent / "spmd_mnist"
"""Our training program in the style of Kubeflow's spmd-mnist JAXJob example, and the Dockerfile it would be built
with (`spmd_mnist_image` builds that image offline)."""
SITE = Path(next(p for p in sys.path if p.endswith("site-packages")))
"""The test's Python's packages, which `python_jax_layer` takes jax and its dependencies from."""
JAX_PACKAGES = ("jax", "jaxlib", "numpy", "numpy.libs", "ml_dtypes", "opt_einsum")
LAYER = "application/vnd.oci.image.layer.v1.tar"
APPLETS = ("sh", "echo", "id", "pwd", "env", "test", "cat", "ls", "touch", "sleep", "printf", "tr", "head", "wc")


@dataclass(frozen=True)
class Entry:
    """One tar entry of a layer: `kind` "dir", "file", "symlink", "hardlink", "chr" (a device node), or "copy" (this
    machine's file or folder `target`, recursively, at `name`)."""

    name: str
    kind: str = "file"
    data: bytes = b""
    target: str = ""  # a link's
    mode: int = 0o644
    uid: int = 0
    gid: int = 0


@dataclass(frozen=True)
class Spec:
    """An image: its layers (bottom first) and its config's process defaults."""

    layers: Sequence[Sequence[Entry]]
    compress: bool = True  # gzip layers (else plain tar: faster to build for a large image)
    entrypoint: Sequence[str] | None = None
    cmd: Sequence[str] | None = None
    working_dir: str = ""
    env: Sequence[str] = ()
    user: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)


def busybox_layer(passwd: str = "root:x:0:0:root:/root:/bin/sh\n", extra: Sequence[Entry] = ()) -> list[Entry]:
    """A root of busybox: /bin/busybox and its applets' links, /etc/passwd and /etc/group, /tmp."""
    entries = [
        Entry("bin", "dir", mode=0o755),
        Entry("bin/busybox", "file", BUSYBOX.read_bytes(), mode=0o755),
        *(Entry(f"bin/{a}", "symlink", target="busybox") for a in APPLETS),
        Entry("etc", "dir", mode=0o755),
        Entry("etc/passwd", "file", passwd.encode()),
        Entry("etc/group", "file", b"root:x:0:\n"),
        Entry("tmp", "dir", mode=0o1777),
    ]
    return entries + list(extra)


def _tar(entries: Sequence[Entry], out: IO[bytes]) -> None:
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in entries:
            if e.kind == "copy":
                tar.add(e.target, e.name, filter=_plain)
                continue
            info = tarfile.TarInfo(e.name)
            info.mode, info.uid, info.gid, info.mtime = e.mode, e.uid, e.gid, 0
            kinds = {
                "dir": tarfile.DIRTYPE,
                "file": tarfile.REGTYPE,
                "symlink": tarfile.SYMTYPE,
                "hardlink": tarfile.LNKTYPE,
                "chr": tarfile.CHRTYPE,
            }
            info.type = kinds[e.kind]
            if e.kind in ("symlink", "hardlink"):
                info.linkname = e.target
            if e.kind == "chr":
                info.devmajor, info.devminor = 1, 3
            info.size = len(e.data) if e.kind == "file" else 0
            tar.addfile(info, io.BytesIO(e.data) if e.kind == "file" else None)


def _plain(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """A file of this machine's as an image holds it: root's, no caches."""
    if "__pycache__" in info.name.split("/"):
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _libraries(programs: Sequence[str]) -> list[str]:
    """The shared libraries `programs` load (ldd), outside the Python environment they come from."""
    found: set[str] = set()
    for program in programs:
        done = subprocess.run(["ldd", program], capture_output=True, text=True, check=False)
        for line in done.stdout.splitlines():
            path = line.split("=>")[-1].split("(")[0].strip()
            if path.startswith("/") and not path.startswith(str(SITE.parent.parent.parent)):
                found.add(path)
    return sorted(found)


def python_jax_layer() -> list[Entry]:
    """Debian's python3.11 with this machine's jax, jaxlib, numpy, ml_dtypes and opt_einsum (those of the Python that
    runs the tests), and the shared libraries they load: an image in which a JAX program runs, nothing else of this
    machine's."""
    stdlib = Path("/usr/lib/python3.11")
    programs = ["/usr/bin/python3.11", *map(str, (stdlib / "lib-dynload").glob("*.so"))]
    programs += [str(p) for name in ("jaxlib", "numpy") for p in (SITE / name).rglob("*.so")]
    entries = [
        Entry("usr/bin/python3", "copy", target="/usr/bin/python3.11"),
        Entry("usr/lib/python3.11", "copy", target=str(stdlib)),
        *(Entry(lib.lstrip("/"), "copy", target=os.path.realpath(lib)) for lib in _libraries(programs)),
        *(
            Entry(f"usr/lib/python3/dist-packages/{name}", "copy", target=str(SITE / name))
            for name in JAX_PACKAGES
            if (SITE / name).exists()
        ),
    ]
    return busybox_layer() + entries


def spmd_mnist_image() -> Spec:
    """The image spmd_mnist/Dockerfile describes, in the shape of the one Kubeflow's JAXJob example builds
    (kubeflow/trainer release-1.9 @ 289f1790 examples/jax/jax-dist-spmd-mnist/Dockerfile: FROM python:3.13, jax
    pip-installed, `WORKDIR /app`, the program and its data module added to /app, `ENTRYPOINT ["python3",
    "<program>"]`).
    Python and JAX are this machine's (`python_jax_layer`, one uncompressed layer as a `pip install` layer is), the
    program a layer of its own as an `ADD` makes it. The config is what that Dockerfile gives: python:3.13's Env
    (docker-library/python @ 12629ffd 3.13/bookworm/Dockerfile: `/usr/local/bin` before Debian's PATH,
    PYTHON_VERSION), the WorkingDir, and the Entrypoint with no Cmd (an ENTRYPOINT clears the CMD its base image set,
    `python3`)."""
    app = [
        Entry("app", "dir", mode=0o755),
        *(Entry(f"app/{name}", "file", (SPMD_MNIST / name).read_bytes()) for name in ("datasets.py", "spmd_mnist.py")),
    ]
    return Spec(
        [python_jax_layer(), app],
        compress=False,
        entrypoint=["python3", "spmd_mnist.py"],
        working_dir="/app",
        env=[
            "PATH=/usr/local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            f"PYTHON_VERSION={sys.version.split()[0]}",
        ],
    )


def layout(folder: Path, spec: Spec) -> str:
    """Write `spec` as an OCI image layout in `folder` (made); the manifest's digest."""
    blobs = folder / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def blob(data: bytes) -> dict[str, Any]:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"digest": f"sha256:{digest}", "size": len(data)}

    layers, diffs = [], []
    for entries in spec.layers:
        if spec.compress:
            buf = io.BytesIO()
            _tar(entries, buf)
            diffs.append("sha256:" + hashlib.sha256(buf.getvalue()).hexdigest())
            layers.append({"mediaType": f"{LAYER}+gzip", **blob(gzip.compress(buf.getvalue(), mtime=0))})
            continue
        staged = blobs / "staged"  # a large layer: written to its file, never held in memory
        with staged.open("wb") as f:
            _tar(entries, f)
        digest = hashlib.sha256()
        with staged.open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        staged.rename(blobs / digest.hexdigest())
        diffs.append(f"sha256:{digest.hexdigest()}")
        layers.append({"mediaType": LAYER, "digest": diffs[-1], "size": (blobs / digest.hexdigest()).stat().st_size})
    process: dict[str, Any] = {"Env": list(spec.env)}
    for key, value in (("Entrypoint", spec.entrypoint), ("Cmd", spec.cmd)):
        if value is not None:
            process[key] = list(value)
    if spec.working_dir:
        process["WorkingDir"] = spec.working_dir
    if spec.user:
        process["User"] = spec.user
    rootfs = {"type": "layers", "diff_ids": diffs}
    config = {"architecture": "amd64", "os": "linux", "config": process, "rootfs": rootfs}
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(json.dumps(config).encode())},
        "layers": layers,
    }
    described = {"mediaType": manifest["mediaType"], **blob(json.dumps(manifest).encode())}
    if spec.annotations:
        described["annotations"] = dict(spec.annotations)
    (folder / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (folder / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [described]}))
    return str(described["digest"])


def docker_archive(oci: Path, archive: Path, name: str) -> None:
    """The image of layout `oci` as `docker save` writes it, tagged `name` (skopeo, offline)."""
    skopeo = shutil.which("skopeo") or "/usr/bin/skopeo"
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(
            [skopeo, "--tmpdir", scratch, "copy", "--quiet", f"oci:{oci}", f"docker-archive:{archive}:{name}"],
            check=True,
            # its blob-info cache and temporary files in `scratch`, never this machine's /var/lib/containers or
            # /var/tmp, which a test beside this one checks are unchanged (containers/image takes root's cache from
            # /var/lib/containers unless _CONTAINERS_ROOTLESS_UID says the caller is a user)
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": scratch,
                "XDG_DATA_HOME": scratch,
                "_CONTAINERS_ROOTLESS_UID": str(os.getuid() or 1),
            },
        )


def oci_archive(oci: Path, archive: Path) -> None:
    """The layout `oci` as one tar, as `docker buildx build --output type=oci` writes it (its files at the top)."""
    with tarfile.open(archive, "w") as tar:
        for path in sorted(oci.rglob("*")):
            tar.add(path, str(path.relative_to(oci)), recursive=False)
