"""Simulate every workload of a set of manifests: what is checked before anything runs, then every workload at once
(`workloads`), each with its own controllers (`attempts`), and the report."""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import random
import secrets
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from jaxinfra.errors import Problem
from jaxinfra_sim import controllers
from jaxinfra_sim.cluster import workloads
from jaxinfra_sim.cluster.control_plane import API_PORT, DEFAULT_API_HOST, emulate
from jaxinfra_sim.cluster.shared import Simulation
from jaxinfra_sim.cluster.sources import Source
from jaxinfra_sim.core import model
from jaxinfra_sim.core.errors import MachineLimit, Unavailable
from jaxinfra_sim.core.options import Options
from jaxinfra_sim.core.podrun import Listener
from jaxinfra_sim.core.results import Report, Verdict, WorkloadResult
from jaxinfra_sim.kubelet import eviction, volumes
from jaxinfra_sim.kubelet.container import Credentials
from jaxinfra_sim.network import kubeproxy, netpol
from jaxinfra_sim.node import capacity, parts
from jaxinfra_sim.node.node import Node
from jaxinfra_sim.platform import gke_tpu, standins
from jaxinfra_sim.runtime import rootfs, runc, sandbox

Sources = Sequence[Source]
"""The clusters of one invocation (simulate/sources.py): all its YAML files one, each stack its own."""


def _probed(pod: model.Pod) -> list[tuple[str, tuple[model.Probe, ...]]]:
    """Each of the pod's containers' name and probes."""
    return [(pod.container, pod.probes), *((c.name, c.probes) for c in pod.others)]


def _plan(
    sources: Sources,
    check_all: bool,
    host_paths: Mapping[str, Path] | None = None,
    k8s_client: bool = True,
    images: Mapping[str, object] | None = None,
) -> Report:
    """Emulate each source as its own cluster; its static problems, before anything runs, each named by its file
    (`host_paths`: the hostPaths --host-path maps, checked as the kubelet checks a node's path; `k8s_client`: the
    pods' Python has `kubernetes`, which JAX's Kubernetes detection needs)."""
    report = Report([])
    for source in sources:
        cluster = emulate(
            source.manifests,
            0,
            check_all,
            before_pods=functools.partial(_refuse_drafts, not check_all),
            k8s_client=k8s_client,
        )
        report.problems += source.problems + tuple(source.where(p) for p in cluster.problems)
        report.problems += tuple(
            source.where(p) for w in cluster.workloads for p in volumes.mapped_problems(w, host_paths or {})
        )
        report.notes += source.notes
        report.notes += [n for w in cluster.workloads for n in volumes.host_path_notes(w, host_paths or {})]
        report.notes += netpol.of_manifests(source.manifests, [p for w in cluster.workloads for p in w.pods]).notes
        if not check_all:  # the containers that run here only because the simulator stands in for their image
            report.notes += [
                note
                for w in cluster.workloads
                if w.pods
                for note in standins.notes(w.id, {c.name: c.image for c in w.pods[0].others})
            ]
        if skipped := controllers.not_simulated(source.manifests):
            report.notes.append(
                f"stored, not simulated (the simulator runs {controllers.SUPPORTED}): {', '.join(skipped)}"
            )
        for file, ids in source.inputs().items():
            report.inputs.setdefault(file, []).extend(ids)
        report.results += [
            WorkloadResult(source.file_of(w.id), w, manifests=source.manifests) for w in cluster.workloads
        ]
        if not cluster.workloads and len(sources) > 1:
            report.notes.append(
                f"{source.name}: no workload here; each stack file is a cluster of its own and all the YAML "
                "another, so these objects reach no other cluster's workloads"
            )
        if not check_all:  # the images not given whole: their containers run this machine's programs
            used = {i for w in cluster.workloads for p in w.pods for i in (p.image, *(c.image for c in p.others))}
            for image in sorted(used):
                if not _given_whole((images or {}).get(image)) and image not in report.unchecked_images:
                    report.unchecked_images.append(image)
                    report.notes.append(_unchecked(image, (images or {}).get(image) is not None))
            whole = {i for i in used if _given_whole((images or {}).get(i))}
            report.notes += [n for w in cluster.workloads for n in gke_tpu.whole_image_notes(w, whole.__contains__)]
        if not check_all:  # the containers' own commands run: each needs one
            report.problems += tuple(
                source.where(
                    Problem(
                        f"{w.id} container {name}",
                        None,
                        "no command: the image's entrypoint is not known here",
                        "set command (and args) on the container, or give its image as an OCI image layout or a "
                        "`docker save` archive (--image IMAGE=PATH)",
                    )
                )
                for w in cluster.workloads
                if w.pods
                for name, command, image in [
                    (w.pods[0].container, w.pods[0].command, w.pods[0].image),
                    *((c.name, c.command, c.image) for c in w.pods[0].others),
                ]
                if not command and not _runs_something((images or {}).get(image))
            )
            report.problems += tuple(
                source.where(
                    Problem(
                        f"{w.id} container {c.container} securityContext.runAsNonRoot",
                        True,
                        f"CreateContainerConfigError: {why} (the kubelet refuses to start it)",
                        "set runAsUser to a non-zero uid, or give the image a numeric non-root USER",
                    )
                )
                for w in cluster.workloads
                if w.pods
                for c in (w.pods[0], *(w.pods[0].as_container(o) for o in w.pods[0].others))
                for why in [_non_root_refused(c, (images or {}).get(c.image))]
                if why
            )
        else:
            report.notes += [note for w in cluster.workloads if w.group and (note := _probed_alone(w))]
            report.notes += [
                f"{w.id}: its containers' probes ({', '.join(probed)}) are not run: the built-in probe does not serve "
                "what they check (--run-command runs them)"
                for w in cluster.workloads
                if w.pods
                for probed in [
                    sorted({f"{p.kind} of {name}" for name, ps in _probed(w.pods[0]) for p in ps}),
                ]
                if probed
            ]
    if not report.results and not report.problems:
        report.problems = (
            Problem(
                "manifests",
                0,
                f"no workload to simulate: the simulator runs {controllers.SUPPORTED}",
                "pass the YAML that `jaxinfra synth` writes, a stack file, or manifests holding one of those",
            ),
        )
    return report


PRELOAD = ("jax", "jaxinfra_sim.jax.probe")
"""Imported once, before the probe pods are forked, so that every pod starts warm."""
PRELOAD_IF_PRESENT = ("jaxlib.mlir.dialects.mhlo", "jaxlib.mlir.dialects.builtin")
"""MLIR dialects JAX imports only at a process's first lowering, which in every group is rank 0's,
on the critical path; a name this jaxlib lacks is skipped."""


def _probed_alone(w: model.Workload) -> str | None:
    """The note on the containers of a JAX pod the probe does not run (None: it runs each): it runs in the JAX
    container, its processes those of every accelerator container (`Pod.processes`)."""
    pod = w.group[0]
    held = [c for c in dict.fromkeys(pod.processes.containers if pod.processes else ()) if c != pod.container]
    rest = [c for c in pod.others if c.name not in held]
    if not rest:
        return None
    also = f" (with the processes of {', '.join(held)})" if held else ""
    return (
        f"{w.id}: the probe runs in container {pod.container} alone{also}; not run: "
        + ", ".join(f"{c.role} container {c.name}" for c in rest)
        + " (--run-command runs every container)"
    )


def _given_whole(image: object) -> bool:
    """Whether `image` (an `--image` value) is an image given whole (`oci_image.Image`), its own programs run."""
    from jaxinfra_sim.runtime.oci_image import Image

    return isinstance(image, Image)


def _unchecked(image: str, top_layer: bool) -> str:
    """The note on an image not given whole (`top_layer`: given as a folder, `--image IMAGE=DIR`)."""
    ran = "its folder over this machine's programs" if top_layer else "this machine's programs (/usr, its Python)"
    return (
        f"image {image} not checked: its containers ran {ran}, not the image's own (on a cluster a program the image "
        f"lacks fails its container, StartError); give it whole to run it: --image {image}=LAYOUT or =ARCHIVE"
    )


def _runs_something(image: object) -> bool:
    """An image given whole (`oci_image.Image`) whose Entrypoint or Cmd a container without `command` runs."""
    from jaxinfra_sim.runtime.oci_image import Image

    return isinstance(image, Image) and bool(image.config.entrypoint or image.config.cmd)


def _non_root_refused(pod: model.Pod, image: object) -> str | None:
    """Why the kubelet refuses the container `pod` is under runAsNonRoot, given its image whole (`oci_image`)."""
    from jaxinfra_sim.runtime.image_config import non_root_refused
    from jaxinfra_sim.runtime.oci_image import Image

    return non_root_refused(pod.security, image.config) if isinstance(image, Image) else None


def preload() -> None:
    """What the probe pods need, imported in the process that will fork them."""
    for name in PRELOAD:
        importlib.import_module(name)
    for name in PRELOAD_IF_PRESENT:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _start_api_server(sim: Simulation, runnable: Sequence[WorkloadResult]) -> None:
    """Only where some pod mounts a ServiceAccount token (and so can reach it) does the simulation get its API
    server: each such ServiceAccount a bearer token, the pods the server's CA."""
    accounts = sorted({(p.namespace, p.service_account) for r in runnable for p in r.workload.pods if p.token})
    if not accounts:
        return
    from jaxinfra_sim.apiserver.rbac import Subject
    from jaxinfra_sim.apiserver.server import ApiServer

    tokens = {account: secrets.token_urlsafe(32) for account in accounts}
    sim.server = ApiServer(
        sim.api[0], {token: Subject(*account) for account, token in tokens.items()}, sim.tmp / "apiserver.log"
    )
    network = sim.node.network if sim.node is not None else None
    sim.server.start([], network.join if network is not None else None)
    sim.api = (sim.api[0], sim.server.port)
    sim.credentials = Credentials(sim.server.ca_pem, tokens)


def _shifted_folders(options: Options) -> list[str]:
    """As root, the folders the user mapped are written as the containers' shifted ids, not the machine's root: the
    one note that says so."""
    mapped = sorted({str(p) for p in [*options.volumes.values(), *options.host_paths.values()]})
    if os.geteuid() != 0 or not mapped:
        return []
    return [
        f"a container's root is this machine's uid {runc.id_base()} here (its own user namespace, never the "
        f"machine's root): {', '.join(mapped)} is written as that id, so a folder it must write needs to be writable "
        "by it (chmod o+w), and what it leaves there is that id's"
    ]


def _check_ids(runnable: Sequence[WorkloadResult], node: Node, images: Mapping[str, object]) -> None:
    """Unprivileged, every container's uid, gid and groups (its image's User where the image is given whole: `images`)
    must be ids the pods' user namespace maps (0, the caller, and its subordinate ids): `Unavailable` (exit 3) names
    the first container that needs more, and the fix."""
    if os.geteuid() == 0:
        return
    from jaxinfra_sim.runtime.image_config import applied
    from jaxinfra_sim.runtime.oci_image import Image

    subordinate = node.network.subordinate if node.network is not None else None
    for r in runnable:
        for pod in r.workload.pods:
            for c in (pod, *(pod.as_container(o) for o in pod.others)):
                image = images.get(c.image)
                s = applied(c, image).security if isinstance(image, Image) else c.security
                missing = runc.unmapped({s.uid, s.gid, *s.groups}, subordinate)
                if missing:
                    have = f"only {subordinate[0][1]} subordinate ids" if subordinate else "none (/etc/subuid)"
                    raise Unavailable(
                        f"pod {pod.hostname} runs as ids {sorted(missing)}, which a container of an unprivileged user "
                        f"needs from its subordinate ids, and this user has {have}",
                        "sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $USER (and Debian's "
                        "uidmap package), or run jaxinfra simulate as root",
                    )


def simulate(sources: Sources, options: Options, listener: Listener) -> Report:
    """Run every workload at once (`workloads`: as many as fit this machine together, the rest as they end; Kueue's
    quota in turn): each source (all the YAML, or one stack) is one cluster."""
    started = time.monotonic()
    deadline = started + options.timeout
    report = _plan(sources, not options.run_command, options.host_paths, options.k8s_client, options.images)
    report.problems += _unknown_checks(report, options)
    for r in report.results:
        if r.workload.problems:
            r.verdict, r.reason = Verdict.FAILED, f"{len(r.workload.problems)} problems; not started"
        elif r.workload.undetermined is not None and r.workload.suspended is None:  # the probe would prove nothing
            r.verdict, r.reason = Verdict.UNDETERMINED, f"{r.workload.undetermined}; not started"
    runnable = [r for r in report.results if r.verdict == Verdict.PENDING]
    if runnable and not report.problems and not report.refused:
        admit(runnable, options)
        # Before anything runs: every part of this machine the pods will use, all missing ones named at once (exit 3);
        # runc's known vulnerabilities, where it has any, are notes.
        report.notes.extend(parts.require(parts.uses(options.run_command, options.egress)).warnings())
        if options.run_command:  # a volume where this machine's runc would take another container's files: exit 3
            runc.refuse_holes((p for r in runnable for p in r.workload.pods), parts.runc_trusted())
        isolation = sandbox.preflight()  # (the check's own rehearsal: can pods get their own /etc/hosts here?)
        parent = runc.scratch_parent() if options.run_command else None
        with tempfile.TemporaryDirectory(prefix="jaxinfra-sim-", dir=parent) as tmp:
            # Searchable (not readable) by others: as root, the OCI runtime reaches each container's root as the
            # container's own ids (`runc.ID_BASE`), not the machine's root.
            os.chmod(tmp, 0o711)
            seed = random.SystemRandom().randrange(1, 255)
            sim = Simulation(
                options, listener, isolation, Path(tmp), deadline, seed, (DEFAULT_API_HOST, API_PORT), started=started
            )
            try:
                rootfs.machine()  # read once, before any pod is forked
                limited = any(
                    p.memory_limit
                    or p.cpu_millis
                    or options.run_command
                    and any(c.memory_limit or c.cpu_millis for c in p.others)
                    for r in runnable
                    for p in r.workload.pods
                )
                sim.node = Node.create(f"{os.getpid()}-{seed}", limited, options.egress, Path(tmp))
                report.notes.extend(sim.node.notes)
                report.notes.extend(eviction.notes(p for r in runnable for p in r.workload.pods))
                if options.run_command:
                    _check_ids(runnable, sim.node, options.images)
                    report.notes.extend(_shifted_folders(options))
                _start_api_server(sim, runnable)
                clusters = {id(r.manifests): r.manifests for r in runnable}.values()  # every cluster IP answered
                services = kubeproxy.services(m for manifests in clusters for m in manifests)
                sim.proxy = kubeproxy.Proxy.start(sim.node.network, services, time.monotonic())
                if not options.run_command:
                    preload()
                report.machine = workloads.run(runnable, sim)
            finally:
                if sim.server is not None:
                    sim.server.close()
                    report.api_log = _lines(sim.tmp / "apiserver.log")
                if sim.node is not None:
                    if sim.node.root is not None:  # gone while the last attempt ended: the machine's verdict still
                        report.machine = report.machine or sim.node.root.gone()
                    sim.node.close()
    report.seconds = time.monotonic() - started
    return report


def _lines(path: Path) -> list[str]:
    """A log's lines; none where it is gone (the simulation's folder removed under it: `node.Root`)."""
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def _unknown_checks(report: Report, options: Options) -> tuple[Problem, ...]:
    """A --provision naming no ProvisioningRequest AdmissionCheck that a workload here waits for would rehearse
    nothing: each is a problem, with the checks there are."""
    known = sorted({c for r in report.results for c in r.workload.provisioning})
    return tuple(
        Problem(
            "--provision",
            check,
            "no workload here waits for a ProvisioningRequest AdmissionCheck of this name",
            f"use one of {', '.join(known)}"
            if known
            else "remove it: no ClusterQueue of these inputs names an AdmissionCheck of Kueue's ProvisioningRequest "
            "controller (a flex-start pool: NodePool(flex_start=True) with Cluster(kueue=True))",
        )
        for check in options.faults.provision
        if check not in known
    )


def admit(runnable: Sequence[WorkloadResult], options: Options) -> None:
    """Capacity admission: refuse (MachineLimit, exit 3) a workload this machine cannot hold even alone, before any pod
    starts; those that fit alone but not together take turns (`workloads`)."""
    capacity.raise_descriptor_limit()
    for r in runnable:
        _refuse_past(workloads.need_of(r, options.run_command))


def _refuse_drafts(run_command: bool, drafts: Sequence[controllers.Draft]) -> None:
    """Capacity admission before any pod object exists (a JobSet of a million pods is refused, not built): each
    workload's pods at one device each, the least they can be."""
    for draft in drafts:
        if draft.unserved is not None:  # it starts no pod here
            continue
        pods = sum(job.completions for job in draft.jobs)
        _refuse_past(capacity.need(draft.id, pods, pods, run_command))


def _refuse_past(need: capacity.Need) -> None:
    if why := capacity.refusal(need):
        raise MachineLimit(why)
