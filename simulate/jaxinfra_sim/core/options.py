"""What a simulation was asked for: faults to inject, timeouts, the images' code, volumes kept across simulations, the
hostPaths mapped to this machine's folders, and the image's Python (`Options`, read by the cluster, the kubelet and the
report). The whole request from the command line (the inputs, these options, the reports to write) is the cluster's
(`cluster.sources.Request`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxinfra_sim.core import model

if TYPE_CHECKING:
    from jaxinfra_sim.runtime.oci_image import Image


@dataclass(frozen=True)
class Faults:
    """Injected faults; a selector is a pod hostname/name or a global rank."""

    kill: Mapping[str, float] = field(default_factory=dict)  # SIGKILL this long after the pod starts
    fail: frozenset[str] = frozenset()  # the container exits 1 at start
    hang: frozenset[str] = frozenset()  # the container stops making progress
    delay: Mapping[str, float] = field(default_factory=dict)  # the pod starts this late
    preempt: Mapping[str, float] = field(
        default_factory=dict
    )  # SIGTERM this long after it starts, SIGKILL after its grace
    # Kueue's ProvisioningRequest AdmissionChecks, by name: provisioned this long after the workload is queued (None:
    # never); a check not named is Ready at once
    provision: Mapping[str, float | None] = field(default_factory=dict)

    @staticmethod
    def matches(selector: str, pod: model.Pod) -> bool:
        """A pod by its hostname, its name, or its (first) JAX rank (a pod that is no JAX process has none)."""
        return selector in (pod.hostname, pod.name, str(pod.rank if pod.rank is not None else ""))

    def lookup(self, table: Mapping[str, Any] | frozenset[str], pod: model.Pod) -> Any:
        for selector in table:
            if self.matches(selector, pod):
                return table[selector] if isinstance(table, Mapping) else True
        return None


@dataclass(frozen=True)
class Options:
    run_command: bool = False  # run the container's own command instead of the probe
    images: Mapping[str, Path | Image] = field(
        default_factory=dict
    )  # image (as in the manifest) -> the folder of its top layer, or the image itself (`oci_image.load`)
    volumes: Mapping[str, Path] = field(
        default_factory=dict
    )  # claim or bucket name -> a folder that outlives the simulation
    host_paths: Mapping[str, Path] = field(
        default_factory=dict
    )  # a hostPath's path, as the manifest writes it -> the folder (or file) of this machine it is (--host-path)
    grace_cap: float = 3.0  # cap on terminationGracePeriodSeconds when a pod is stopped (speed; a cluster waits it out)
    k8s_client: bool = True  # the pods' Python can import `kubernetes` (an image built with jax[k8s])
    egress: bool = True  # pods reach beyond the simulation (through pasta or slirp4netns, where installed)
    timeout: float = 300.0  # the whole simulation
    init_timeout: float | None = None  # cap on every pod's JAX init timeout
    heartbeat_timeout: int = 10
    shutdown_timeout: int = 10
    faults: Faults = field(default_factory=Faults)
