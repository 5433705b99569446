"""The container: what a pod's process becomes after the fork, and what the simulator prepares for it
before — its sandbox's description (`sandbox.Spec`: the folder its root filesystem is built in, its
/etc/hosts, its ServiceAccount token volume, its volumes' sources with their kubelet ownership, its
image folder and working directory, its securityContext) and its env with what stands in for its
machine. After the fork it joins the simulation's cgroup and pod network, enters its sandbox, and
runs the built-in probe or its own command, exec'd unchanged.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from jaxinfra import descriptors, interrupts
from jaxinfra_sim.core import model, trees
from jaxinfra_sim.core.options import Faults, Options
from jaxinfra_sim.jax import k8s_detection
from jaxinfra_sim.kubelet import image, podsandbox, qos, sysctls, volume_manager
from jaxinfra_sim.network import dns
from jaxinfra_sim.node import capacity
from jaxinfra_sim.platform import gke_tpu, standins
from jaxinfra_sim.runtime import image_config, oci_image, rootfs, runc, sandbox, shim

HOST_DEVICE_COUNT = "--xla_force_host_platform_device_count"
"""XLA's flag for the number of host (CPU) devices, which a program may set in XLA_FLAGS itself."""
PR_SET_TIMERSLACK = 29  # prctl(2)
#: The probe's timer slack: how late the kernel may fire a timeout of the probe's threads to batch it with others.
#: Each JAX process's gloo transport wakes every 10 ms to look at a flag (facebookincubator/gloo@2242f7d,
#: gloo/transport/tcp/loop.cc, `Loop::run`'s epoll_wait timeout), about 100 wake-ups a second even when idle: 256
#: pods spent about half of 2 cores on them. 50 ms instead of the default 50 us lets the kernel batch them: the probe's
#: checks at 256 processes took 7 s instead of 12 (benchmarks/scale.py). The probe's own timeouts are seconds, and a
#: socket that is ready still wakes its thread at once.
PROBE_TIMER_SLACK_NS = 50_000_000


@dataclass(frozen=True)
class Credentials:
    """What the ServiceAccount token volume holds for pods that mount one: the API server's CA and a token per
    account."""

    ca_pem: bytes
    tokens: Mapping[tuple[str, str], str]  # (namespace, ServiceAccount) -> bearer token

    def write(self, pod: model.Pod, folder: Path) -> Path:
        """The volume's files (token, ca.crt, namespace), as the kubelet projects them."""
        folder.mkdir(parents=True)
        (folder / "token").write_text(self.tokens[(pod.namespace, pod.service_account)], encoding="utf-8")
        (folder / "ca.crt").write_bytes(self.ca_pem)
        (folder / "namespace").write_text(pod.namespace, encoding="utf-8")
        return folder


@dataclass(frozen=True)
class Container:
    """Everything a pod's process needs to become its container, prepared in the simulator before the fork."""

    pod: model.Pod
    env: dict[str, str]
    spec: sandbox.Spec  # its sandbox: root filesystem, hosts file, token, volumes, identity
    fail: bool = False  # --fail: exit 1 at start
    hang: bool = False  # --hang: stop making progress
    own_command: bool = False  # run its own command (--run-command; every container but the probe's)
    runtime: runc.Runtime | None = None  # the OCI runtime its own command runs under
    name: str = ""  # its id for the runtime, unique in the simulation
    shift: int = 0  # the machine's id of its uid 0 where the runtime shifts its ids (as root), else 0
    namespaces: podsandbox.Namespaces | None = None  # its pod's pause's it joins, the pod's sysctls it sets

    @property
    def cwd(self) -> Path:
        """Its working directory, as the container sees it."""
        return Path(self.spec.workdir)


def prepare(
    pod: model.Pod,
    pod_dir: Path,
    records: Mapping[str, str],
    options: Options,
    faults: Faults,
    sitecustomize: Path | None,
    credentials: Credentials | None,
    storage: Callable[[model.Mount], Path],
    sandbox_name: str = "sandbox",
    own_command: bool = False,
    oci: runc.Runtime | None = None,
) -> Container:
    """A (re)started container's files: a fresh sandbox folder `pod_dir/sandbox_name` (one per container of the pod;
    an emptyDir, in `pod_dir`, is the pod's and outlives them), the hosts file with the cluster's DNS `records`, the
    token volume, each volume's source; for a platform image the simulator stands in for, its image's top layer
    (`platform.standins`) unless --image names one."""
    folder = pod_dir / sandbox_name
    given = options.images.get(pod.image)
    unpacked = given if own_command and isinstance(given, oci_image.Image) else None  # the probe runs in our Python
    if unpacked is not None:
        pod = image_config.applied(pod, unpacked)
        sitecustomize = None  # the image's Python, if it has one, is its own
    # As root under the OCI runtime the container's ids are the machine's from runtime.id_base() on: what the kubelet
    # makes as root is made as the container's root.
    shift = runc.id_base() if oci is not None and own_command and os.geteuid() == 0 else 0
    trees.remove_tree(folder)  # the last start's writable layer with it, as containerd removes its snapshot
    folder.mkdir(parents=True)
    hosts = folder / "hosts"
    hosts.write_text(dns.hosts_file(pod, records), encoding="utf-8")
    token = credentials.write(pod, folder / "serviceaccount") if pod.token and credentials is not None else None
    spec = sandbox.Spec(
        dns.uts_hostname(pod),
        folder,
        hosts,
        token,
        volume_manager.sources(pod, pod_dir, folder, storage, shift),
        given if isinstance(given, Path) else None if unpacked else standins.layer(pod.image, folder / "image"),
        pod.working_dir or "/",
        pod.security,
        sitecustomize,
        volume_manager.kernel_views(pod),
        unpacked.rootfs if unpacked is not None else None,
        shifted=unpacked is not None and unpacked.shifted,
    )
    return Container(
        pod,
        process_env(pod, sitecustomize, options.k8s_client, probe=not own_command, unpacked=unpacked is not None),
        spec,
        bool(faults.lookup(faults.fail, pod)),
        bool(faults.lookup(faults.hang, pod)),
        own_command,
        oci if own_command else None,
        # Unique on this machine: as root runc names the container's cgroup after it, and where a v1 controller
        # (cpuset) has no pod group above it that cgroup is at its hierarchy's root, where two containers of one name
        # would share it (one's `runc delete` removing it under the other's `runc create`: "openat2
        # .../cpuset/<name>/cgroup.procs: no such file or directory"). The simulator's pid tells simulations apart; the
        # folder below the simulation's (its workload's `<serial>-<id>.<recreated>`, pod, generation, sandbox) the
        # containers of one simulation, also those of workloads running side by side (each has its own pod-0).
        "-".join((f"jaxinfra{os.getpid()}", *folder.parts[-4:])),
        shift,
    )


def become(
    c: Container,
    isolation: str,
    control: int,
    status_w: int,
    out_w: int,
    err_w: int,
    inherited: list[int],
    options: Options,
    workload: model.Workload,
    handshake: sandbox.Handshake | None = None,
    joins: Sequence[Callable[[], None]] = (),
    subordinate: tuple[tuple[int, int], tuple[int, int]] | None = None,
    adopt: Callable[[int], None] | None = None,
    nproc: int | None = None,
) -> NoReturn:
    """In the forked pod process: join what the simulation shares (`joins`: its cgroup, its pod network), enter the
    pod's sandbox, fork the container's PID 1 there (this process stays as its shim, serving `control`), become the
    container. Never returns."""
    code = 1
    try:
        for signum in interrupts.STOPS:  # the simulator's own handlers are not the container's
            signal.signal(signum, signal.SIG_DFL)
        os.setsid()  # a session of its own: the caller's terminal is not the container's
        interrupts.release()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        pod, env = c.pod, c.env
        for join in joins:
            join()
        if c.namespaces is not None and c.namespaces.net:  # in the pod's own network namespace, as its sandbox's
            try:
                sysctls.apply(c.namespaces.net)
            except OSError as err:
                os.write(2, f"failed to create pod sandbox: {err.strerror}\n".encode())
                os._exit(shim.START_ERROR)
        # Other pods' pipes must not stay open here (their EOFs would never come), nor the runner's ends of this
        # pod's own handshake (closed when the group ends before the runner answers, its EOF ends the wait below).
        # Only those: libraries' own descriptors (gRPC's at-fork state, for one) must survive.
        for fd in inherited:
            os.close(fd)
        for fd in descriptors.caller():  # the caller's own (a shell's `3>file`): never a container's
            with contextlib.suppress(OSError):
                os.close(fd)
        if c.runtime is not None:
            if handshake is not None:  # its ids are the runtime's to map
                handshake.close()
            _contained(c, c.runtime, control, status_w, subordinate, adopt, nproc)
        cwd = sandbox.enter(isolation, c.spec, handshake)  # while this process has one thread
        if nproc is not None:  # no pids group: counted in the pod's own user namespace, made just now (`runtime`)
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        shim.fork_init(control)
        qos.set_own(qos.reachable(pod.oom_score_adj))  # the container's, as the runtime sets it; its shim keeps ours
        sandbox.start(isolation, c.spec, cwd)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # fresh objects: the parent's locks stay behind
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        os.environ.clear()
        os.environ.update(env)
        status = os.fdopen(status_w, "w", buffering=1)

        def report(phase: str, data: Mapping[str, Any]) -> None:
            status.write(json.dumps({"phase": phase, **data}) + "\n")

        if c.fail:
            print("jaxinfra simulate: injected failure (--fail)", file=sys.stderr)
            os._exit(1)
        if c.hang:
            report("initializing", {})
            while True:
                time.sleep(3600)
        if c.own_command:
            argv = [*pod.command, *pod.args]
            report("running", {})
            os.execvpe(argv[0], argv, env)
        if pod.global_index in workload.others:  # not a JAX process (`jax.processes`): a stand-in for its program
            _stand_in(report)
        # Inherited by every thread JAX starts from here (prctl(2)); a --run-command program keeps the default.
        ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(PROBE_TIMER_SLACK_NS), 0, 0, 0)
        from jaxinfra_sim.jax import probe

        # What this process inherited is never garbage here: left to the collector, every full
        # collection would walk it and copy each page it touches (copy-on-write), a third of the
        # probe's compile time in a parent without many objects of its own.
        gc.freeze()
        if pod.wrapper is not None:  # the probe stands in for what the wrapper execs: the env it sets up first
            env = _wrapped_env(pod, env)
            os.environ.clear()
            os.environ.update(env)
        image.shape(env)
        report("initializing", {})
        result = probe.run_pod(_probe_spec(pod, workload, env, options), report)  # forks where the pod holds several
        report("result", {"result": result})
        code = 0 if result.get("ok") else 1
    except BaseException as err:  # the container crashed: say why on its stderr, exit non-zero
        try:
            print(f"jaxinfra simulate: {type(err).__name__}: {err}", file=sys.stderr)
        except BaseException:
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _contained(
    c: Container,
    rt: runc.Runtime,
    control: int,
    status_w: int,
    subordinate: tuple[tuple[int, int], tuple[int, int]] | None,
    adopt: Callable[[int], None] | None,
    nproc: int | None,
) -> NoReturn:
    """The container under the OCI runtime: its root built in a mount namespace of this process's (its volumes bound
    by descriptor), its bundle written, then `runc create` and `start`; this process stays as its shim."""
    # The simulator's objects this fork inherited must never close a descriptor: once their numbers are closed
    # below and reused (for /dev/null, a runc pipe), a file object's finalizer run by the collector would close ours.
    gc.disable()
    keep = sorted({0, 1, 2, control, status_w})
    for low, high in zip(keep, [*keep[1:], os.sysconf("SC_OPEN_MAX")]):
        os.closerange(low + 1, high)  # nothing of the simulator's reaches the runtime or the container
    ns = c.namespaces or podsandbox.Namespaces()
    sandbox.node_mounts(subordinate, ns.user)
    libc = ctypes.CDLL(None, use_errno=True)
    owner = (c.shift, c.shift) if c.shift else None
    idmap = rootfs.id_namespace(libc, c.shift, runc.ID_COUNT) if c.shift else None
    cwd = sandbox.build(libc, c.spec, owner, runtime=True, idmap=idmap, trusted=rt.trusted)
    bundle = c.spec.scratch / "bundle"
    bundle.mkdir()
    argv = [*c.pod.command, *c.pod.args]
    proc = runc.process(argv, c.env, cwd, c.pod.security, nproc, qos.reachable(c.pod.oom_score_adj))
    spec, shifted = c.spec, bool(c.shift)
    config = runc.config(
        proc, spec.scratch / "root", spec.hostname, c.pod.security, spec.views, shifted, c.name, ns.join, ns.sysctl
    )
    runc.write(bundle, "config.json", config)

    def started() -> None:
        os.write(status_w, (json.dumps({"phase": "running"}) + "\n").encode())

    shim.run_container(rt, c.name, bundle, control, started, adopt)


def _stand_in(report: Callable[[str, Mapping[str, Any]], None]) -> NoReturn:
    """Under the probe, a pod that is not a JAX process (a gateway, an inference server): running and Ready at once,
    it serves until it is stopped (its controller deleting it once the workload completes), then exits 0 at SIGTERM,
    as a server that shuts down cleanly does. Its own command runs only under --run-command."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    report("running", {})
    while True:
        signal.pause()


def _wrapped_env(pod: model.Pod, env: Mapping[str, str]) -> dict[str, str]:
    """Run the pod's entrypoint wrapper with `env -0` as the program it execs: the environment the program would get."""
    done = subprocess.run(
        [pod.command[0], "-c", pod.wrapper or "", pod.command[3] if len(pod.command) > 3 else "sh", "env", "-0"],
        env=dict(env),
        capture_output=True,
        check=True,
        timeout=30,
    )
    return dict(item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)


def _probe_spec(pod: model.Pod, workload: model.Workload, env: Mapping[str, str], options: Options) -> Any:
    """What the probe checks: the workload's group as the manifests define it (its JAX pods' processes: `Pod.rank`,
    `Workload.process_count`); where JAX's Kubernetes detection finds the rank (no env names it:
    `k8s_detection.k8s_detects`), the group K8sCluster forms, the pod's own Job's pods, with its completion index as
    the rank (each child Job of a JobSet is a group of its own, as on a cluster).

    A pod of several JAX processes (`Pod.processes`: a launcher, several accelerator containers) runs that many
    probes, each told its rank (the pod's first plus its local index), the group's size and a coordinator, as its
    launcher tells them, so JAX's detection does not run: the coordinator is the env's, else rank 0's pod's IP on the
    port its env names, else K8sCluster's default (a launcher's own choice, which the manifest does not show)."""
    from jaxinfra_sim.jax.probe import ProbeSpec
    from jaxinfra_sim.jax.timeouts import JAX_HEARTBEAT_TIMEOUT, JAX_SHUTDOWN_TIMEOUT, init_timeout

    rank, processes, groups, hosts, rank_from = (
        workload.rank_of(pod),
        workload.process_count,
        workload.groups,
        workload.hosts_per_group,
        "",
    )
    local, coordinator = pod.process_devices if pod.processes is not None else (), ""
    if local:
        zero = workload.group[0]
        coordinator = f"{zero.ip}:{coordinator_port(zero) or k8s_detection.K8S_COORDINATOR_PORT}"
    elif k8s_detection.k8s_detects(pod, env, options.k8s_client):
        job = k8s_detection.k8s_job(pod)
        processes = sum(1 for p in workload.pods if k8s_detection.k8s_job(p) == job)
        rank, groups, hosts, rank_from = pod.completion_index, 1, processes, k8s_detection.K8S_DETECTED
    everyone = len(workload.pods) - len(workload.group) + workload.process_count
    return ProbeSpec(
        expected_rank=rank,
        num_processes=processes,
        devices_per_process=local[0] if local else pod.devices,
        groups=groups,
        hosts_per_group=hosts,
        rank_from=rank_from,
        init_timeout=int(init_timeout(env, options)),
        heartbeat_timeout=capacity.dilated(options.heartbeat_timeout, everyone, JAX_HEARTBEAT_TIMEOUT),
        shutdown_timeout=capacity.dilated(options.shutdown_timeout, everyone, JAX_SHUTDOWN_TIMEOUT),
        local_devices=local,
        first_rank=rank,
        coordinator=coordinator,
    )


def process_env(
    pod: model.Pod, sitecustomize: Path | None, k8s_client: bool = True, probe: bool = False, unpacked: bool = False
) -> dict[str, str]:
    """The pod's env plus what stands in for its machine and image: the CPU as its accelerator, its own IP,
    whether its Python has the `kubernetes` package. `probe`: the built-in probe runs in it. JAX's CPU devices
    stand in for a TPU or GPU pod's chips (`JAX_NUM_CPU_DEVICES`, `model.Pod.devices`), as `JAX_PLATFORMS` stands in
    for its platform, unless its program sets its own count (`XLA_FLAGS`'s `--xla_force_host_platform_device_count`,
    which that variable would override); a CPU pod's program gets only what its manifest sets (jaxinfra's contract
    sets the variable for its CPU pools), so a stranger's own choice holds. The probe gets them always. `unpacked`:
    its root is an image's (`oci_image`), whose env is in `pod.env` already: nothing of this machine's Python (PATH,
    the sitecustomize's markers) goes in, and runc sets HOME from its /etc/passwd."""
    env = dict(pod.env)
    if not unpacked:
        env.setdefault("PATH", f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
        # The runtime's HOME for a uid the image's /etc/passwd does not name: / (root's is /root).
        env.setdefault("HOME", "/root" if pod.security.uid == 0 else "/")
    env["JAX_PLATFORMS"] = "cpu"
    own_count = HOST_DEVICE_COUNT in pod.env.get("XLA_FLAGS", "")
    if probe or (pod.accelerator != "cpu" and not own_count):  # each of a launcher's processes its share
        env["JAX_NUM_CPU_DEVICES"] = str(pod.process_devices[0])
    # A real pod binds the coordinator on its own network namespace's wildcard; here, its own IP,
    # where the port is known from the env (a script may hard-code its own: then the wildcard).
    if port := coordinator_port(pod):
        env.setdefault("JAX_COORDINATOR_BIND_ADDRESS", f"{pod.ip}:{port}")
    elif probe and "JAX_COORDINATOR_ADDRESS" not in env and k8s_detection.k8s_detects(pod, env, k8s_client):
        # The coordinator JAX's Kubernetes detection names, port 55527 in every group: the pods of a simulation share
        # one network namespace, where a second group's rank 0 could not bind the same wildcard port.
        if address := k8s_detection.k8s_coordinator(pod, env):
            env.setdefault("JAX_COORDINATOR_BIND_ADDRESS", f"{pod.ip}:{address.port}")
    if unpacked:
        return env
    if pod.accelerator == "tpu":
        env[gke_tpu.MARKER] = "1"
    if not k8s_client:
        env[image.WITHOUT_K8S_CLIENT] = "1"
    if sitecustomize is not None and image.needs_hook(env):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (rootfs.SITE, env.get("PYTHONPATH", "")) if p)
    return env


def coordinator_port(pod: model.Pod) -> int | None:
    """The port rank 0 will listen on, as far as the env says: JAX_COORDINATOR_ADDRESS, or JAX_COORDINATOR_PORT beside
    a host-only one (a program that joins them: `env.joined`), or the Training Operator v1's COORDINATOR_PORT
    (next to COORDINATOR_ADDRESS), or JAX's TPU detection default (JAX_COORDINATOR_PORT, else 8482)."""
    address = pod.env.get("JAX_COORDINATOR_ADDRESS", "")
    if ":" in address:
        port = address.rsplit(":", 1)[1]
    elif address and "JAX_COORDINATOR_PORT" in pod.env:
        port = pod.env["JAX_COORDINATOR_PORT"]
    elif pod.env.get("COORDINATOR_ADDRESS") and "COORDINATOR_PORT" in pod.env:
        port = pod.env["COORDINATOR_PORT"]
    elif pod.accelerator == "tpu":
        port = pod.env.get("JAX_COORDINATOR_PORT", "8482")
    else:
        return None
    return int(port) if port.isdigit() else None
