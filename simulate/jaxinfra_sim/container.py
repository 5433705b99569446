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
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from jaxinfra import interrupts
from jaxinfra_sim import dns, image, model, paths, rootfs, sandbox, shim, volumes
from jaxinfra_sim.options import Faults, Options
from jaxinfra_sim.platform import gke_tpu, standins
from jaxinfra_sim.security import Security

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
) -> Container:
    """A (re)started container's files: a fresh sandbox folder `pod_dir/sandbox_name` (one per container of the pod;
    an emptyDir, in `pod_dir`, is the pod's and outlives them), the hosts file with the cluster's DNS `records`, the
    token volume, each volume's source; for a platform image the simulator stands in for, its image's top layer
    (`platform.standins`) unless --image names one."""
    folder = pod_dir / sandbox_name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    hosts = folder / "hosts"
    hosts.write_text(dns.hosts_file(pod, records), encoding="utf-8")
    token = credentials.write(pod, folder / "serviceaccount") if pod.token and credentials is not None else None
    spec = sandbox.Spec(
        dns.uts_hostname(pod),
        folder,
        hosts,
        token,
        _volumes(pod, pod_dir, folder, storage),
        options.images.get(pod.image) or standins.layer(pod.image, folder / "image"),
        pod.working_dir or "/",
        pod.security,
        sitecustomize,
        _views(pod),
    )
    return Container(
        pod,
        process_env(pod, sitecustomize, options.k8s_client),
        spec,
        bool(faults.lookup(faults.fail, pod)),
        bool(faults.lookup(faults.hang, pod)),
        own_command,
    )


def _volumes(
    pod: model.Pod, pod_dir: Path, folder: Path, storage: Callable[[model.Mount], Path]
) -> list[tuple[Path, str, bool]]:
    """Each mount's source: an emptyDir lives with the pod (kept across its container's restarts), a claim or a
    bucket with the simulation (or in --volume's folder), a hostPath with its node (or in --host-path's folder), a
    configMap/secret/downwardAPI volume's files are written afresh at each start. Folders are named by
    `paths.safe_name`, and every path the manifest joins onto one (a file's, a subPath, a hostPath's path) stays
    inside it (`paths.inside`, which raises `paths.UnsafePath` otherwise). A hostPath of the node's kernel
    filesystems is not among them (`_views`)."""
    out = []
    for m in pod.mounts:
        what = f"{pod.workload} pod {pod.hostname} volume {m.volume}"
        if m.kind == "hostPath" and volumes.kernel_view(m.key) is not None:
            continue
        if m.kind == "hostPath":
            source = storage(m)
            with _guarded(what, m.key):
                _host_path(source, m)
        elif m.kind == "emptyDir":
            source = pod_dir / "volumes" / paths.safe_name(m.volume)
        elif m.kind == "files":
            source = folder / "volumes" / paths.safe_name(m.volume)
            source.mkdir(parents=True, exist_ok=True)
            for relative, content in m.files:
                target = paths.inside(source, relative, f"{what} file")
                with _guarded(f"{what} file", relative):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(content, encoding="utf-8", errors="surrogateescape")
        else:
            source = storage(m)
        if m.kind != "hostPath":
            source.mkdir(parents=True, exist_ok=True)
            _own(source, m, pod.security)
        if m.sub_path:  # the kubelet creates a missing subPath as a folder
            source = paths.inside(source, m.sub_path, f"{what} subPath")
            with _guarded(f"{what} subPath", m.sub_path):
                source.mkdir(parents=True, exist_ok=True)
        out.append((source, m.path, m.read_only))
    return out


def _host_path(source: Path, mount: model.Mount) -> None:
    """A hostPath's path on its node's own folder as the kubelet and containerd leave it before the mount
    (`volumes.py` cites them): a missing one made, a file for the types whose path is not a folder (an empty file
    stands in for a node's File, Socket or device), else a folder. What exists is left as it is (a mapped folder,
    what an earlier container left on the node), its type checked before anything started (mapped) or the
    container's own doing; neither ownership nor mode is changed (the kubelet manages no hostPath)."""
    if source.exists() or source.is_symlink():
        return
    source.parent.mkdir(parents=True, exist_ok=True)
    if mount.host_type in volumes.HOST_PATH_FILES:
        source.touch(mode=0o644)
    else:
        source.mkdir(mode=0o755)


def _views(pod: model.Pod) -> tuple[tuple[str, str], ...]:
    """(the container's own path, mount path) of each hostPath of the node's kernel filesystems (`/sys`, `/proc/sys`
    and below, their subPath joined): shown read-only, as the container's own (`sandbox.start`)."""
    out = []
    for m in pod.mounts:
        view = volumes.kernel_view(m.key) if m.kind == "hostPath" else None
        if view is not None:
            out.append((paths.normal(f"{view}/{m.sub_path}") if m.sub_path else view, m.path))
    return tuple(out)


def _own(source: Path, mount: model.Mount, security: Security) -> None:
    """A writable volume's ownership as the kubelet leaves it: an emptyDir is world-writable (pkg/volume/emptydir:
    0777); with the pod's fsGroup, its files and a claim's or bucket's are that group's, group-writable and setgid on
    folders (pkg/volume/volume_linux.go SetVolumeOwnership), else as they are — a `--volume NAME=DIR` too, as the
    kubelet does to the disk it stands for. Only root can give them away; unprivileged, the container's ids are the
    caller's, who owns them already."""
    if mount.read_only or mount.kind == "files":
        return
    if mount.kind == "emptyDir":
        source.chmod(0o777)
    if security.fs_group is None or os.geteuid() != 0:
        return
    for folder, _dirs, files in os.walk(source):
        for name in [folder, *(os.path.join(folder, f) for f in files)]:
            if os.path.islink(name):
                continue
            os.chown(name, -1, security.fs_group, follow_symlinks=False)
            mode = os.stat(name, follow_symlinks=False).st_mode
            os.chmod(name, (mode | 0o060 | (0o2010 if name == folder else 0)) & 0o7777)


@contextlib.contextmanager
def _guarded(what: str, relative: str) -> Iterator[None]:
    """Around creating what a manifest path names: an OSError (a file in the way, a name too long) is its problem."""
    try:
        yield
    except OSError as err:
        raise paths.UnsafePath(
            what,
            relative,
            f"the kubelet cannot create it: {err.strerror or err}",
            "give each file its own path inside the volume",
        ) from None


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
) -> NoReturn:
    """In the forked pod process: join what the simulation shares (`joins`: its cgroup, its pod network), enter the
    pod's sandbox, fork the container's PID 1 there (this process stays as its shim, serving `control`), become the
    container. Never returns."""
    code = 1
    try:
        for signum in interrupts.STOPS:  # the simulator's own handlers are not the container's
            signal.signal(signum, signal.SIG_DFL)
        os.setpgid(0, 0)
        interrupts.release()
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        pod, env = c.pod, c.env
        for join in joins:
            join()
        # Other pods' pipes must not stay open here (their EOFs would never come), nor the runner's ends of this
        # pod's own handshake (closed when the group ends before the runner answers, its EOF ends the wait below).
        # Only those: libraries' own descriptors (gRPC's at-fork state, for one) must survive.
        for fd in inherited:
            os.close(fd)
        cwd = sandbox.enter(isolation, c.spec, handshake)  # while this process has one thread
        shim.fork_init(control)
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
        # Inherited by every thread JAX starts from here (prctl(2)); a --run-command program keeps the default.
        ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(PROBE_TIMER_SLACK_NS), 0, 0, 0)
        from jaxinfra_sim import probe

        # What this process inherited is never garbage here: left to the collector, every full
        # collection would walk it and copy each page it touches (copy-on-write), a third of the
        # probe's compile time in a parent without many objects of its own.
        gc.freeze()
        if pod.wrapper is not None:  # the probe stands in for what the wrapper execs: the env it sets up first
            env = _wrapped_env(pod, env)
            os.environ.clear()
            os.environ.update(env)
        probe.configure(pod.devices)
        image.shape(env)
        report("initializing", {})
        result = probe.run_probe(_probe_spec(pod, workload, env, options), report)
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


def init_timeout(env: Mapping[str, str], options: Options) -> float:
    value = float(env.get("JAX_INITIALIZATION_TIMEOUT", "300") or 300)
    return min(value, options.init_timeout) if options.init_timeout else value


def _probe_spec(pod: model.Pod, workload: model.Workload, env: Mapping[str, str], options: Options) -> Any:
    from jaxinfra_sim.probe import ProbeSpec

    return ProbeSpec(
        expected_rank=pod.global_index,
        num_processes=len(workload.pods),
        devices_per_process=pod.devices,
        groups=workload.groups,
        hosts_per_group=workload.hosts_per_group,
        init_timeout=int(init_timeout(env, options)),
        heartbeat_timeout=options.heartbeat_timeout,
        shutdown_timeout=options.shutdown_timeout,
    )


def process_env(pod: model.Pod, sitecustomize: Path | None, k8s_client: bool = True) -> dict[str, str]:
    """The pod's env plus what stands in for its machine and image: the CPU as its accelerator, its own IP,
    whether its Python has the `kubernetes` package."""
    env = dict(pod.env)
    env.setdefault("PATH", f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    # The runtime's HOME for a uid the image's /etc/passwd does not name: / (root's is /root).
    env.setdefault("HOME", "/root" if pod.security.uid == 0 else "/")
    env["JAX_PLATFORMS"] = "cpu"
    env["JAX_NUM_CPU_DEVICES"] = str(pod.devices)
    # A real pod binds the coordinator on its own network namespace's wildcard; here, its own IP,
    # where the port is known from the env (a script may hard-code its own: then the wildcard).
    if port := coordinator_port(pod):
        env.setdefault("JAX_COORDINATOR_BIND_ADDRESS", f"{pod.ip}:{port}")
    if pod.accelerator == "tpu":
        env[gke_tpu.MARKER] = "1"
    if not k8s_client:
        env[image.WITHOUT_K8S_CLIENT] = "1"
    if sitecustomize is not None and image.needs_hook(env):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (rootfs.SITE, env.get("PYTHONPATH", "")) if p)
    return env


def coordinator_port(pod: model.Pod) -> int | None:
    """The port rank 0 will listen on, as far as the env says: JAX_COORDINATOR_ADDRESS, or JAX_COORDINATOR_PORT beside
    a host-only one (a program that joins them: `contract.joined`), or the Training Operator v1's COORDINATOR_PORT
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
