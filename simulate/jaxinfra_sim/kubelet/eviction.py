"""The kubelet's local storage eviction: a pod whose emptyDir outgrows its `sizeLimit`, or whose containers' writes
outgrow their `ephemeral-storage` limits, is evicted (Failed, reason `Evicted`).

Upstream (kubernetes/kubernetes @ 0239cd73 pkg/kubelet/eviction/eviction_manager.go `localStorageEviction`), checked
for each active pod in this order, the first that holds evicting it:
- `emptyDirLimitEviction`: a volume's used bytes over its emptyDir's positive `sizeLimit`;
- `podEphemeralStorageLimitEviction`: the pod's ephemeral storage (its containers' writable layers and logs, its
  local ephemeral volumes: emptyDirs on the node's disk, not `medium: Memory`, pkg/volume/util IsLocalEphemeralVolume)
  over the pod's limit (component-helpers resource.PodLimits: the sum of its containers' and sidecars' limits, or
  an init container's with the sidecars before it where that is more), where any container declares one;
- `containerEphemeralStorageLimitEviction`: one of its containers' (spec.containers: not an init container or a
  sidecar) logs plus its writable layer over its own limit.
The pod is stopped with a grace period of `EVICTION_GRACE_S` (`evictPod` with immediateEvictionGracePeriodSeconds,
which overrides the pod's terminationGracePeriodSeconds) and fails with reason `Evicted` and the message of
pkg/kubelet/eviction/helpers.go (kubernetes @ 008b3652: `emptyDirMessageFmt`, `podEphemeralStorageMessageFmt`,
`containerEphemeralStorageMessageFmt`; quantities as apimachinery's Quantity.String() writes them). No
DisruptionTarget condition comes with it (`evictPod`'s condition is nil here): for a Job it is a failed pod like any
other, counted against its backoffLimit.

Here (`StorageWatch`, polled by the runner) each running pod that has such a limit is measured every
`STORAGE_EVERY_S`: the kubelet's eviction manager runs every 10 s (pkg/kubelet/kubelet.go evictionMonitoringPeriod) on
cAdvisor's disk
figures (10 s housekeeping), so a pod here is evicted sooner after it crosses the line than on a node, never for less.
Usage is what the file system allocated (st_blocks x 512, each inode once, one file system: `du -x`), walked by
descriptor without following links (`os.fwalk`): an emptyDir's folder, the container's writable layer (its
sandbox's folders on disk, `writable_layer`), and its logs (the bytes it wrote to stdout and stderr, at
most what the kubelet's log rotation keeps, `LOG_MAX_BYTES`; without the CRI log format's per-line prefix).

Not enforced: an emptyDir of `medium: Memory` is a folder on the disk here, not a tmpfs of its sizeLimit (`notes`
says so); what it holds counts neither toward a limit nor toward the container's memory. configMap volumes, which a
node counts as local ephemeral storage too, are not counted (their files are a manifest's, small).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from jaxinfra.quantity import suffix_of
from jaxinfra_sim.core import model, paths, trees
from jaxinfra_sim.core.events import Reason
from jaxinfra_sim.core.inputs import quantity
from jaxinfra_sim.core.podrun import ContainerRun, PodRun, Process

REASON = Reason.EVICTED
"""The pod's status.reason (helpers.go `Reason`)."""
EVICTION_GRACE_S = 1.0
"""How long an evicted pod's containers get between their stop signal and SIGKILL (eviction_manager.go
immediateEvictionGracePeriodSeconds, the override a local storage eviction passes)."""
STORAGE_EVERY_S = 1.0
"""How often the runner measures the pods that have a storage limit (the kubelet: every 10 s)."""
LOG_MAX_BYTES = 5 * 10 * 2**20
"""The most of a container's logs that count: the kubelet keeps containerLogMaxFiles (5) files of at most
containerLogMaxSize (10Mi) each, its KubeletConfiguration defaults."""


@dataclass(frozen=True)
class Quantity:
    """A storage limit: its value in bytes (rounded up, as Quantity.Value() does) and how the manifest wrote it."""

    bytes: int
    binary: bool  # written with a binary suffix (Ki, Mi, ...): Quantity's BinarySI format, else DecimalSI

    def __str__(self) -> str:
        return canonical(self.bytes, self.binary)


def parse(text: str) -> Quantity | None:
    """A storage limit as written (`1Gi`, `500M`), or None where there is none, it does not parse or is not positive."""
    value = quantity(text) if text else None
    if value is None or value <= 0:
        return None
    return Quantity(-(-value.numerator // value.denominator), suffix_of(text).endswith("i"))


def canonical(value: int, binary: bool) -> str:
    """A whole number of bytes as apimachinery's Quantity.String() writes it (CanonicalizeBytes): in a binary format
    the largest power-of-1024 suffix that keeps it whole (numbers under 1024 as decimal), else the largest power of
    1000."""
    if binary and value >= 1024:
        suffixes, base = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), 1024
    else:
        suffixes, base = ("", "k", "M", "G", "T", "P", "E"), 1000
    step = 0
    while value and value % base == 0 and step < len(suffixes) - 1:
        value //= base
        step += 1
    return f"{value}{suffixes[step]}"


def writable_layer(scratch: Path) -> int:
    """The bytes a container holds in its writable layer: its sandbox's `layers` folder on disk (each overlay's upper
    layer, and the folders that stand for its root and its empty folders, `/tmp` among them: `rootfs.Builder
    .writable`), walked from this machine's mount namespace, where the mounts of the container's (its /dev, the
    machine's folders it sees) are not there to be counted."""
    return trees.usage(scratch / "layers")


@dataclass(frozen=True)
class Limits:
    """What of a pod the eviction manager checks: its emptyDirs with a sizeLimit, its containers' limits, the pod's."""

    empty_dirs: tuple[tuple[str, Quantity | None, bool], ...]  # (volume, sizeLimit, on disk: not medium Memory)
    containers: tuple[tuple[str, Quantity | None], ...]  # (main container, its ephemeral-storage limit)
    pod: Quantity | None  # PodLimits' ephemeral-storage

    @property
    def any(self) -> bool:
        """Whether there is anything to measure."""
        return self.pod is not None or any(size is not None and disk for _, size, disk in self.empty_dirs)


def limits(pod: model.Pod) -> Limits:
    """A pod's storage limits, from its containers (the JAX one is `pod` itself, the others `pod.others`)."""
    volumes: dict[str, tuple[str, Quantity | None, bool]] = {}
    for m in (*pod.mounts, *(m for c in pod.others for m in c.mounts)):
        if m.kind == "emptyDir":
            volumes.setdefault(m.volume, (m.volume, parse(m.size_limit), m.medium != "Memory"))
    containers = [(pod.container, parse(pod.ephemeral_limit), "main")]
    containers += [(c.name, parse(c.ephemeral_limit), c.role) for c in pod.others]
    mains = tuple((n, q) for n, q, role in containers if role == "main")  # the only ones checked one by one
    return Limits(tuple(volumes.values()), mains, pod_limit(containers))


def pod_limit(containers: Iterable[tuple[str, Quantity | None, str]]) -> Quantity | None:
    """The pod's ephemeral-storage limit as component-helpers resource.PodLimits adds it up (AggregateContainerLimits):
    its main containers' and sidecars' limits summed, or more where an init container's, with the sidecars started
    before it, is more; the format is the first limit's (Quantity.Add keeps the receiver's). None where no container
    declares one."""
    mains, sidecars, inits = 0, 0, 0
    first: Quantity | None = None
    for _, q, role in containers:
        if q is None:
            continue
        first = first or q
        if role == "main":
            mains += q.bytes
        elif role == "sidecar":
            mains += q.bytes
            sidecars += q.bytes
            inits = max(inits, sidecars)
        else:
            inits = max(inits, q.bytes + sidecars)
    if first is None:
        return None
    return Quantity(max(mains, inits), first.binary)


def verdict(found: Limits, empty_dirs: dict[str, int], containers: dict[str, int], disk_empty_dirs: int) -> str | None:
    """The eviction message for a pod's measured usage, or None: `empty_dirs` by volume, `containers` (writable layer
    plus logs) by container name, `disk_empty_dirs` its emptyDirs on the node's disk together. The first rule that
    holds wins, in the eviction manager's order; the message as the kubelet writes it, its trailing space dropped."""
    for volume, size, disk in found.empty_dirs:
        if disk and size is not None and empty_dirs.get(volume, 0) > size.bytes:
            return f'Usage of EmptyDir volume "{volume}" exceeds the limit "{size}".'
    if found.pod is not None and disk_empty_dirs + sum(containers.values()) > found.pod.bytes:
        return f"Pod ephemeral local storage usage exceeds the total limit of containers {found.pod}."
    for name, q in found.containers:
        if q is not None and containers.get(name, 0) > q.bytes:
            return f'Container {name} exceeded its local ephemeral storage limit "{q}".'
    return None


class StorageWatch:
    """The eviction manager over one attempt's pods: every `STORAGE_EVERY_S`, each running pod with an emptyDir
    sizeLimit or an ephemeral-storage limit is measured (its emptyDirs, each container's writable layer and logs);
    `poll` yields those past a limit, with the kubelet's message. `pod_dir` is where a pod's volumes are, `scratch`
    where a container's sandbox keeps its writable layer (the runner's layout)."""

    def __init__(self, pod_dir: Callable[[PodRun], Path], scratch: Callable[[PodRun, Process], Path]):
        self.pod_dir, self.scratch = pod_dir, scratch
        self.next = 0.0
        self.limits: dict[int, Limits] = {}  # by id() of the PodRun

    def poll(self, runs: list[PodRun], now: float) -> Iterator[tuple[PodRun, str]]:
        if now < self.next:
            return
        self.next = now + STORAGE_EVERY_S
        for r in runs:
            if r.done or r.evicted is not None or not any(p.live for p in r.processes):
                continue
            found = self.limits.get(id(r))
            if found is None:
                found = self.limits[id(r)] = limits(r.pod)
            if not found.any:
                continue
            volumes = self.pod_dir(r) / "volumes"
            dirs = {v: trees.usage(volumes / paths.safe_name(v)) for v, _, _ in found.empty_dirs}
            disk = sum(dirs[v] for v, _, on_disk in found.empty_dirs if on_disk)
            used: dict[str, int] = {}
            if found.pod is not None:  # the containers' own: their logs and their writable layers
                for p in r.processes:
                    name = p.container.name if isinstance(p, ContainerRun) else r.pod.container
                    layer = writable_layer(self.scratch(r, p).resolve()) if p.live and p.running else 0
                    used[name] = used.get(name, 0) + min(p.logged, LOG_MAX_BYTES) + layer
            why = verdict(found, dirs, used, disk)
            if why is not None:
                yield r, why


def notes(pods: Iterable[model.Pod]) -> list[str]:
    """What of the pods' storage limits this simulation does not enforce as a node does, one line each."""
    if any(size is not None and not disk for p in pods for _, size, disk in limits(p).empty_dirs):
        return [
            "an emptyDir of medium Memory is a folder on this machine's disk here, not a tmpfs: its sizeLimit is not "
            "enforced (on a node the tmpfs is that size, and a write past it fails with ENOSPC) and what it holds "
            "does not count toward the container's memory limit"
        ]
    return []
