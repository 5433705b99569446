"""The pod's sandbox container (the "pause"), for a `--run-command` pod whose containers share namespaces, and what of
a pod's spec on its node's namespaces (hostPID, hostIPC, hostUsers, hostPort) the simulation gives and notes.

On a node every pod has one: containerd's CRI starts it before any of the pod's containers (RunPodSandbox: the pause
image's program as PID 1 of the pod's PID namespace, in the pod's IPC, UTS and network namespaces), and each
container joins the namespaces the kubelet says it shares (CRI NamespaceOption, `linux.namespaces` entries with the
pause's /proc/<pid>/ns paths: containerd @d93d18c8 internal/cri/opts/spec_opts.go WithPodNamespaces): the pod's IPC
namespace always, its user namespace where the pod has one (NamespaceMode POD), its PID namespace under
shareProcessNamespace (NamespaceMode POD; else each container's own, CONTAINER), so a
container's `ps` sees the others' processes and the pause as PID 1, and a container's own program is not a PID 1:
the kernel delivers it a SIGTERM it has no handler for, as on a node. kubernetes build/pause/linux/pause.c @fde22c3f
is the pause's whole program: it exits 0 on SIGINT or SIGTERM, reaps every child on SIGCHLD (the orphans of the
shared PID namespace are its children), and otherwise waits (`PROGRAM`: the same in Python).

Here a pause runs only for a pod that shares namespaces (`needed`): shareProcessNamespace, and hostPID and hostIPC,
whose node's namespaces the pause's stand for (each simulated pod has a node of its own: `sim-node-<k>`), never this
machine's. It is a container of the same runtime (`runc`; root filesystem, masked paths, no capability, no_new_privs,
read-only root, uid `PAUSE_UID`) in the pod's network namespace, its namespaces joined through /proc/<its PID
1>/ns/...: its user namespace too, as a user-namespaced pod's containers share their sandbox's (a PID namespace's
/proc is mounted from a user namespace with a say over it), which an unprivileged container's process reaches
through the one the pause's shim runs in (`sandbox.node_mounts`). The pod's IPC sysctls are written where its IPC
namespace is made: by the pause's runtime where there is one, else by each container's (`Namespaces.sysctl`); its
network ones in its own network namespace (`kubelet.sysctls.apply`).

A pod with no pause keeps today's layout: each container has an IPC namespace of its own, where on a node the pod's
containers share one.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from jaxinfra.admission.validation.sysctls import Namespace
from jaxinfra_sim.core import fds, model
from jaxinfra_sim.core.security import Security
from jaxinfra_sim.kubelet import sysctls

PROGRAM = (
    "import os, signal as s; down = lambda *_: os._exit(0); s.signal(s.SIGINT, down); s.signal(s.SIGTERM, down); "
    "s.signal(s.SIGCHLD, s.SIG_IGN); [s.pause() for _ in iter(int, 1)]"
)
"""The pause's program (pause.c's, in the simulator's Python, one line: `python -I -S -c PROGRAM`): it exits 0 on SIGINT
or SIGTERM, and its children are reaped as they exit (SIGCHLD ignored: the kernel reaps them, wait(2)), then waits."""
PAUSE_UID = 65535
"""The pause's uid and gid, an id none of the pod's containers has by default (0 where the user namespace of an
unprivileged simulation does not map it: the caller has no subordinate ids)."""
PAUSE_IMAGE = "registry.k8s.io/pause"
"""The image the pause stands for (nothing is pulled: `PROGRAM` runs in the machine's system)."""
START_TIMEOUT_S = 30.0
"""How long the pause may take to start (its root built, `runc create` and `start`) on a loaded machine."""


class SandboxFailed(OSError):
    """The pod's sandbox could not be made: the kubelet's FailedCreatePodSandBox (it retries; the pod never runs)."""


def needed(pod: model.Pod, run_command: bool) -> bool:
    """Whether the pod's containers share namespaces that a pause holds (under --run-command: with the built-in probe
    only one container runs)."""
    ns = pod.namespaces
    return run_command and (ns.share_process_namespace or ns.host_pid or ns.host_ipc)


def pause_pod(pod: model.Pod, uid: int) -> model.Pod:
    """The pause as a container of `pod`, for `container.prepare`: its program, no env, volume, probe or token, uid
    `uid`, no capability, no_new_privs, a read-only root."""
    security = Security(uid=uid, gid=uid, bounding=(), no_new_privs=True, read_only_root=True)
    return replace(
        pod,
        container="POD",
        image=PAUSE_IMAGE,
        command=(sys.executable, "-I", "-S", "-c", PROGRAM),
        args=(),
        env={},
        working_dir="/",
        mounts=(),
        security=security,
        probes=(),
        token=False,
        memory_limit=None,
        cpu_millis=None,
        ephemeral_limit="",
        others=(),
    )


@dataclass(frozen=True)
class Namespaces:
    """Where a container of the pod (or its pause) runs beyond its own namespaces: those of the pause it joins, and
    the pod's sysctls it sets."""

    join: Mapping[str, str] = field(default_factory=dict)  # OCI namespace type -> the pause's /proc/<pid>/ns/<type>
    user: str | None = None  # unprivileged: the pause's user namespace, which its process joins before the runtime
    sysctl: Mapping[str, str] = field(default_factory=dict)  # the OCI `linux.sysctl` the runtime writes (IPC ones)
    net: Mapping[str, str] = field(default_factory=dict)  # the network sysctls its process writes (`sysctls.apply`)


def namespaces(pod: model.Pod, pause: Pause | None, privileged: bool, own_network: bool) -> Namespaces:
    """A container's `Namespaces`: those of `pause` (None: the pod has none, or this is the pause: it makes its IPC
    namespace and its runtime writes the IPC sysctls), as root (`privileged`) or not; the network sysctls where it is
    in the pod's own network namespace (`own_network`: never the simulation's or this machine's). The pause's user
    namespace is joined by the runtime where it makes the container one (as root); unprivileged, the container's
    process first joins the one the pause's shim runs in, the pause's own or its parent, so that the runtime may."""
    net = sysctls.of(pod.namespaces.sysctls, Namespace.NET) if own_network else {}
    if pause is None:
        return Namespaces(sysctl=sysctls.of(pod.namespaces.sysctls, Namespace.IPC), net=net)
    shared = pod.namespaces.share_process_namespace or pod.namespaces.host_pid
    paths = {kind: f"/proc/{pause.init}/ns/{kind}" for kind in ("user", "ipc", *(("pid",) if shared else ()))}
    return Namespaces(join=paths, user=None if privileged else f"/proc/{pause.shim}/ns/user", net=net)


@dataclass
class Pause:
    """A pause: its shim (the runner's child), the write end of the shim's control pipe, its PID 1 once it runs."""

    shim: int
    control: int
    init: int = 0

    def wait(self, pipes: tuple[int, int, int], timeout: float = START_TIMEOUT_S) -> None:
        """Wait for it to run (its status pipe says so) and find its PID 1, its shim's child; its `pipes` (status,
        stdout, stderr: it writes nothing once it runs) are closed either way. Raises `SandboxFailed` with the
        runtime's message, its shim reaped, where it did not start."""
        status, _, stderr = pipes
        said = b""
        try:
            while fds.readable([status], timeout):
                chunk = os.read(status, 4096)
                said += chunk
                if not chunk or b"\n" in said:
                    break
            if any(json.loads(line or "{}").get("phase") == "running" for line in said.splitlines()):
                with open(f"/proc/{self.shim}/task/{self.shim}/children") as f:
                    self.init = int(f.read().split()[0])
                    return
            why = os.read(stderr, 65536).decode(errors="replace").strip() if fds.readable([stderr], 0) else ""
        except (OSError, ValueError, IndexError) as err:
            why = f"the pause did not start: {err}"
        finally:
            fds.close(pipes)
        self.stop()
        raise SandboxFailed(why.splitlines()[-1] if why else "the pause did not start in time")

    def stop(self) -> None:
        """End it (its shim kills its PID 1 at the end of its control pipe, the kernel every process of its PID
        namespace with it) and reap its shim."""
        with contextlib.suppress(OSError):
            os.close(self.control)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.shim, 0)


def notes(pod: model.Pod, run_command: bool) -> list[str]:
    """What of the pod's host* fields the simulation gives otherwise than a node does, for the report: never the
    machine's own namespaces."""
    ns, out = pod.namespaces, []
    if ns.host_pid:
        out.append(
            "hostPID: the pod's containers share one PID namespace standing for its node's, a pause its PID 1; this "
            "machine's processes are not in it"
            if run_command
            else "hostPID: the probe runs in a PID namespace of its own; this machine's processes are not in it"
        )
    if ns.host_ipc:
        out.append(
            "hostIPC: the pod's containers share one IPC namespace standing for its node's; this machine's is not it"
            if run_command
            else "hostIPC: the probe runs in an IPC namespace of its own, not this machine's"
        )
    if ns.host_users is True:
        out.append(
            "hostUsers: true: the container still runs in a user namespace of its own here; its root is never this "
            "machine's root"
        )
    for port in ns.host_ports:
        out.append(
            f"hostPort {port}: not opened on this machine (a simulated node has no address of its own); reach the pod "
            "at its IP and containerPort"
        )
    return out
