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
import shutil
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "echo", "id", "pwd", "env", "test", "cat", "ls", "touch", "sleep", "printf", "tr", "head", "wc")


@dataclass(frozen=True)
class Entry:
    """One tar entry of a layer: `kind` "dir", "file", "symlink", "hardlink", "chr" (a device node)."""

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


def _tar(entries: Sequence[Entry]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in entries:
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
    return buf.getvalue()


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
        raw = _tar(entries)
        diffs.append("sha256:" + hashlib.sha256(raw).hexdigest())
        layers.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **blob(gzip.compress(raw, mtime=0))})
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
    subprocess.run([skopeo, "copy", "--quiet", f"oci:{oci}", f"docker-archive:{archive}:{name}"], check=True)
