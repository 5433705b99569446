"""The platform's own containers, stood in: images GKE (or one of its add-ons) runs beside a workload, which cannot
run on this machine (no GPUs, no NICs for GPUDirect, no Cloud Storage, no image), yet whose presence a pod's verdict
depends on: a sidecar the pod waits for, a daemon container its Job needs to exit.

Each stood-in image is one row of `TABLE`, recognised by its repository (any tag or digest). Its container is
started as the kubelet starts any other, with its own command, env, mounts and securityContext, in a root whose
top layer (as `--image` gives one) holds, at each path of the image a manifest runs (`StandIn.programs`), a small
program that runs until it is stopped: SIGTERM or SIGINT end it with status 0. So:

- a native sidecar (an init container with `restartPolicy: Always`, as xpk writes the GPUDirect daemons and GKE's
  webhook injects the Cloud Storage FUSE sidecar) is started before the main containers, runs beside them and is
  stopped with the pod;
- a regular container whose command runs the daemon in the background and then waits for a file the main
  container writes when it ends (xpk before its native sidecars: `while [ ! -e
  "/usr/share/workload/workload_terminated" ]; do sleep 10; done`) exits as it would on a cluster, by its own loop,
  and the pod completes;
- a wrapper that prepares the daemon first (xpk's TCPXO `set -ex; chmod 755 /fts/entrypoint_rxdm_container.sh;
  /fts/entrypoint_rxdm_container.sh ...`) finds the program where the image has it.

The report notes every container stood in. What the daemons do (GPUDirect's receive-datapath manager serving the
NCCL plugin over a Unix socket, the FUSE mount) is not emulated: NCCL does not run here, and a bucket is a folder
of the simulation (`volumes.py`).

Sources:
- GPUDirect-TCPX (A3 High): AI-Hypercomputer/xpk @367c8382 src/xpk/core/workload_decorators/tcpx_decorator.py
  (`add_tcpx_daemon_container`: image us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev, command
  /tcpgpudmarxd/build/app/tcpgpudmarxd, a native sidecar); the regular-container form at xpk @59ed3e78^
  src/xpk/templates/rxdm_container_a3high.yaml, whose main container writes the file
  (src/xpk/core/docker_container.py `get_main_container`, `gpu_workload_terminate_command`).
- GPUDirect-TCPXO (A3 Mega): xpk @367c8382 src/xpk/core/workload_decorators/tcpxo_decorator.py
  (`add_tcpxo_daemon_container`: image us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev, program
  /fts/entrypoint_rxdm_container.sh); the regular-container form at xpk @59ed3e78^
  src/xpk/templates/rxdm_container_a3mega.yaml.
- Cloud Storage FUSE: GoogleCloudPlatform/gcs-fuse-csi-driver @5fcdc04a cmd/sidecar_mounter/Dockerfile (ENTRYPOINT
  /gcs-fuse-csi-driver-sidecar-mounter), deploy/base/node/node.yaml (image gke.gcr.io/gcs-fuse-csi-driver-sidecar-
  mounter), pkg/webhook/mutatingwebhook.go `Handle` (the pod annotation gke-gcsfuse/volumes: 'true' or 'True'; no
  second injection), injection.go `injectSidecarContainer` (first of the init containers, after istio-proxy;
  a container the pod declares under the sidecar's name gives its image and is replaced): the webhook is
  `platform.gcsfuse`.

Not emulated: the daemons' work (above), their resource requests, GKE's per-version sidecar tag (the untagged
repository is injected), a private mirror of the sidecar image (not recognised: `--image` gives it a folder), the
webhook's options beyond the sidecar (metadata prefetch, workload identity credentials, host-network tokens).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from jaxinfra_sim.platform.gcsfuse import GCSFUSE_IMAGE


@dataclass(frozen=True)
class StandIn:
    """One platform image the simulator stands in for."""

    repositories: tuple[str, ...]  # the image's repository, as manifests name it (tag and digest ignored)
    what: str  # what runs there on a cluster, as the report says it
    programs: tuple[str, ...]  # paths in the image that manifests run: each a program that runs until stopped
    entrypoint: tuple[str, ...] = ()  # the image's ENTRYPOINT, for a container that sets no command
    missing: str = "no GPUs, no GPUDirect NICs, no image"  # why it cannot run here
    source: str = ""


TABLE: tuple[StandIn, ...] = (
    StandIn(
        ("us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev",),
        "GPUDirect-TCPX's receive-datapath manager (A3 High)",
        ("/tcpgpudmarxd/build/app/tcpgpudmarxd",),
        source="AI-Hypercomputer/xpk @367c8382 src/xpk/core/workload_decorators/tcpx_decorator.py",
    ),
    StandIn(
        ("us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev",),
        "GPUDirect-TCPXO's receive-datapath manager (A3 Mega)",
        ("/fts/entrypoint_rxdm_container.sh",),
        source="AI-Hypercomputer/xpk @367c8382 src/xpk/core/workload_decorators/tcpxo_decorator.py",
    ),
    StandIn(
        (GCSFUSE_IMAGE, "gcr.io/gke-release/gcs-fuse-csi-driver-sidecar-mounter"),
        "the Cloud Storage FUSE CSI driver's sidecar mounter",
        ("/gcs-fuse-csi-driver-sidecar-mounter",),
        entrypoint=("/gcs-fuse-csi-driver-sidecar-mounter",),
        missing="no Cloud Storage, no FUSE mount, no image: the bucket is a folder of the simulation",
        source="GoogleCloudPlatform/gcs-fuse-csi-driver @5fcdc04a cmd/sidecar_mounter/Dockerfile",
    ),
)

PROGRAM = """#!/bin/sh
# jaxinfra simulate stands in for {what}: {path} of {repository} cannot run on this machine.
# It runs until it is stopped; SIGTERM or SIGINT end it with status 0.
echo "jaxinfra simulate: {what} stood in: {path} runs until stopped" >&2
child=
trap 'kill $child 2>/dev/null; exit 0' TERM INT
while :; do sleep 3600 & child=$!; wait $child; done
"""
"""Each stood-in program: a shell script (the machine's /bin/sh), waiting in `wait`, which a signal interrupts."""


def repository(image: str) -> str:
    """An image reference without its digest and tag: `registry/path/name`."""
    name = image.split("@", 1)[0]
    head, sep, tag = name.rpartition(":")
    return head if sep and "/" not in tag else name


def lookup(image: str) -> StandIn | None:
    """The stand-in for `image`, recognised by its repository, or None."""
    found = repository(image)
    return next((s for s in TABLE if found in s.repositories), None)


def layer(image: str, folder: Path) -> Path | None:
    """The stood-in image's top layer, written into `folder` (which must not exist): each of its programs at its path,
    executable by any user; None where `image` is not stood in. Every path written is one of `TABLE`'s, never a
    manifest's."""
    found = lookup(image)
    if found is None:
        return None
    for path in found.programs:
        target = folder / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(PROGRAM.format(what=found.what, path=path, repository=repository(image)), encoding="utf-8")
    for made in [folder, *folder.rglob("*")]:  # whatever the container's uid: readable, and the programs runnable
        made.chmod(0o755)
    return folder


def notes(workload: str, containers: Mapping[str, str]) -> list[str]:
    """The report's notes on `containers` (name -> image) of one workload's pods that are stood in."""
    out = []
    for name, image in containers.items():
        found = lookup(image)
        if found is not None:
            out.append(
                f"{workload}: container {name} ({image}) stood in: {found.what} cannot run here ({found.missing}); "
                f"its program ({', '.join(found.programs)}) runs until it is stopped ({found.source})"
            )
    return out
