"""What the emulated cluster produces from manifests: workloads, their pods, DNS, and problems.

Plain frozen dataclasses shared by the emulation (`control_plane` and the components it calls), the
process runner (`pod_workers`), the probe and the report. Nothing here knows about the spec: input is
manifests.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fractions import Fraction
from functools import cached_property
from pathlib import Path

from jaxinfra.errors import Problem
from jaxinfra.upstream import JOB_NAME_LABEL
from jaxinfra_sim.core.security import Security


@dataclass(frozen=True)
class Mount:
    """One volume mounted in the pod's JAX container, as the kubelet sets it up (volumes.py)."""

    volume: str  # the volume's name in the pod spec
    path: str  # mountPath
    sub_path: str = ""
    read_only: bool = False
    kind: str = "emptyDir"  # "emptyDir" | "claim" | "bucket" | "files" | "hostPath"
    key: str = ""  # claim: its name; bucket: the bucket's name; hostPath: the node's path, as the manifest writes it
    files: tuple[tuple[str, str], ...] = ()  # "files": (relative path, content)
    modes: tuple[tuple[str, int], ...] = ()  # "files": (relative path, mode): defaultMode or items[].mode (0644 unset)
    host_type: str = ""  # hostPath: its `type` ("" unset, Directory, DirectoryOrCreate, File, FileOrCreate, ...)
    node: str = ""  # hostPath: the node whose path it is (spec.nodeName: one simulated node per pod)
    size_limit: str = ""  # emptyDir: its sizeLimit, the quantity as the manifest writes it ("" none)
    medium: str = ""  # emptyDir: its medium ("" the node's disk, "Memory" a tmpfs)


@dataclass(frozen=True)
class Probe:
    """One of a container's probes, as the kubelet's prober runs it (`prober.py`), the API server's defaults applied
    (pkg/apis/core/v1/defaults.go SetDefaults_Probe, SetDefaults_HTTPGetAction)."""

    kind: str  # "startup" | "readiness" | "liveness"
    action: str  # "exec" | "tcpSocket" | "httpGet" | "grpc"
    command: tuple[str, ...] = ()  # exec: $(VAR) expanded from the container's literal env only, as the kubelet does
    port: int | str = 0  # tcpSocket, httpGet, grpc: a number, or a name among the container's ports
    host: str | None = None  # tcpSocket, httpGet: None is the pod's IP
    path: str = "/"  # httpGet
    scheme: str = "HTTP"  # httpGet: HTTP | HTTPS (the certificate is not verified)
    headers: tuple[tuple[str, str], ...] = ()  # httpGet httpHeaders
    initial_delay: int = 0  # initialDelaySeconds
    period: int = 10  # periodSeconds
    timeout: int = 1  # timeoutSeconds
    success_threshold: int = 1
    failure_threshold: int = 3
    grace_period: int | None = None  # terminationGracePeriodSeconds: the pod's, unless set, when it kills

    @property
    def handler(self) -> str:
        """What it runs, as `kubectl describe pod` shows it."""
        if self.action == "exec":
            return f"exec {list(self.command)}"
        if self.action == "httpGet":
            return f"http-get {self.scheme.lower()}://{self.host or '[pod IP]'}:{self.port}{self.path}"
        return f"{'tcp-socket' if self.action == 'tcpSocket' else 'grpc'} {self.host or '[pod IP]'}:{self.port}"


@dataclass(frozen=True)
class NamedPort:
    """A named containerPort of one of a pod's containers, init containers included, with its protocol: the ports a
    network plugin lists for the pod (Calico's WorkloadEndpoint `ports`), which a NetworkPolicy's named port names."""

    name: str
    protocol: str  # TCP | UDP | SCTP (TCP unless given)
    number: int


@dataclass(frozen=True)
class Container:
    """One of a pod's containers other than the JAX one, resolved as the kubelet starts it (kubelet.py)."""

    name: str
    role: str  # "init" (each to completion, in order) | "sidecar" (an init container, restartPolicy Always) | "main"
    image: str
    command: tuple[str, ...]  # after $(VAR) expansion
    args: tuple[str, ...]
    env: Mapping[str, str]
    working_dir: str | None
    mounts: tuple[Mount, ...]
    security: Security
    memory_limit: int | None
    cpu_millis: int | None
    probes: tuple[Probe, ...] = ()
    oom_score_adj: int = 0  # the kubelet's for it: its pod's QoS class and its memory request (`qos`)
    ports: Mapping[str, int] = field(default_factory=dict)  # its named containerPorts, which probes may name
    ephemeral_limit: str = ""  # resources.limits.ephemeral-storage, the quantity as the manifest writes it ("" none)
    chips: int = 0  # the TPUs or GPUs its limits request (0: none)

    def pod_fields(self) -> dict[str, object]:
        """Its fields under the names a `Pod` gives its JAX container's."""
        return {
            "container": self.name,
            "image": self.image,
            "command": self.command,
            "args": self.args,
            "env": self.env,
            "working_dir": self.working_dir,
            "mounts": self.mounts,
            "security": self.security,
            "memory_limit": self.memory_limit,
            "cpu_millis": self.cpu_millis,
            "probes": self.probes,
            "oom_score_adj": self.oom_score_adj,
            "named_ports": self.ports,
            "ephemeral_limit": self.ephemeral_limit,
        }


class Launch(StrEnum):
    """Where the number of a pod's JAX processes came from (`jax.launchers`)."""

    ONE = "one process"
    ASSUMED = "one process, assumed"
    CONTAINERS = "several accelerator containers"
    PARALLEL_LAUNCH = "JAX-Toolbox's parallel-launch"
    SHELL_LOOP = "a shell loop"
    TORCHRUN = "torchrun-style --nproc-per-node"
    JAX_FLAGS = "JAX's distributed arguments"
    MAXTEXT = "MaxText's NODE_RANK"
    PAX = "Pax's --host_idx"


@dataclass(frozen=True)
class Processes:
    """The JAX processes of one pod, in local order (local index i has rank: the pod's first rank + i)."""

    devices: tuple[int, ...]  # each process's devices
    containers: tuple[str, ...]  # the container each runs in
    source: Launch
    evidence: str = ""  # what in the manifest says so (the command's words, the containers' limits)

    @property
    def count(self) -> int:
        return len(self.devices)

    @property
    def assumed(self) -> bool:
        """The command may start several, but how many is not in the manifest."""
        return self.source is Launch.ASSUMED

    def describe(self) -> str:
        """One line, as `explain` and the report say it."""
        sizes = sorted(set(self.devices))
        each = f"{sizes[0]} device{'s' if sizes[0] != 1 else ''}" if len(sizes) == 1 else f"devices {self.devices}"
        each += " each" if len(sizes) == 1 and self.count > 1 else ""
        where = ", ".join(dict.fromkeys(self.containers))
        line = f"{self.count} JAX process{'es' if self.count != 1 else ''} ({each}) in {where}: {self.source}"
        return f"{line} ({self.evidence})" if self.evidence else line


@dataclass(frozen=True)
class PodNamespaces:
    """Which of its node's namespaces a pod asks to share, and the kernel settings it sets in its own, as its spec says
    (spec.hostPID, hostIPC, hostUsers, shareProcessNamespace, securityContext.sysctls, its containers' hostPorts;
    hostNetwork is `Pod.host_network`): what the kubelet admits (`kubelet.sysctls`) and the runtime gives
    (`kubelet.podsandbox`)."""

    sysctls: tuple[tuple[str, str], ...] = ()  # (name, value), in the spec's order
    host_pid: bool = False
    host_ipc: bool = False
    host_users: bool | None = None  # None: unset (the node's user namespace, as true)
    share_process_namespace: bool = False
    host_ports: tuple[int, ...] = ()  # every container's non-zero hostPorts


@dataclass(frozen=True)
class Pod:
    """One pod as the controller and kubelet would start it, with everything resolved: its own fields are its JAX
    container's, `others` its other containers'."""

    workload: str  # "<Kind>/<namespace>/<name>" of its workload
    namespace: str
    name: str  # deterministic pod name (the controller's name without the random suffix)
    hostname: str
    subdomain: str | None
    ip: str  # its own address in the pod CIDR, e.g. 10.244.0.2 (`control_plane._ip`)
    job_index: int  # JobSet job index (label jobset.sigs.k8s.io/job-index); 0 for a plain Job
    completion_index: int  # batch.kubernetes.io/job-completion-index
    global_index: int  # job_index * pods_per_job + completion_index: pod order in the workload
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    container: str  # name of the container that runs JAX (the first container)
    image: str
    command: tuple[str, ...]  # after $(VAR) expansion; () = the image's entrypoint
    args: tuple[str, ...]
    env: Mapping[str, str]  # fully resolved: literal values, fieldRefs, $(VAR), controller- and platform-injected
    working_dir: str | None
    devices: (
        int  # JAX CPU devices for this process: chips per host of its accelerator, else JAX_NUM_CPU_DEVICES, else 1
    )
    accelerator: str  # "tpu" | "gpu" | "cpu" (from its resource limits)
    container_ports: tuple[int, ...] = ()
    probes: tuple[Probe, ...] = ()  # its JAX container's
    named_ports: Mapping[str, int] = field(default_factory=dict)  # its JAX container's named containerPorts
    port_names: tuple[NamedPort, ...] = ()  # every container's named containerPorts, with their protocols
    node: str = ""  # the simulated node it runs on (one per pod): spec.nodeName
    host_network: bool = False  # spec.hostNetwork: the node's hostname and hosts file, not the pod's
    host_aliases: tuple[tuple[str, tuple[str, ...]], ...] = ()  # spec.hostAliases: (ip, hostnames) for its /etc/hosts
    service_account: str = "default"  # spec.serviceAccountName
    token: bool = False  # the ServiceAccount token volume is mounted (admission's decision)
    mounts: tuple[Mount, ...] = ()  # its JAX container's volumes
    grace_period: float = 30.0  # spec.terminationGracePeriodSeconds: SIGTERM to SIGKILL when it is stopped
    security: Security = field(default_factory=Security)  # its JAX container's securityContext, resolved
    memory_limit: int | None = None  # its JAX container's resources.limits.memory, in bytes
    cpu_millis: int | None = None  # its JAX container's resources.limits.cpu, in millicores
    oom_score_adj: int = 0  # its JAX container's, as the kubelet gives it (`qos`)
    ephemeral_limit: str = ""  # its JAX container's resources.limits.ephemeral-storage, as written ("" none)
    others: tuple[Container, ...] = ()  # its other containers in the kubelet's order: init containers, then mains
    restart_policy: str = "Never"  # spec.restartPolicy: what the kubelet does when one of its containers exits
    namespaces: PodNamespaces = field(default_factory=PodNamespaces)  # what it shares of its node's, its sysctls
    processes: Processes | None = None  # where it holds several JAX processes (`jax.launchers`); None: one, its JAX
    # container's, of `devices`
    rank: int | None = None  # its (first) JAX process's rank in its workload's group (`jax.processes.ranked`); None:
    # not a JAX process

    @property
    def process_devices(self) -> tuple[int, ...]:
        """Each of its JAX processes' devices."""
        return self.processes.devices if self.processes is not None else (self.devices,)

    @property
    def job(self) -> str:
        """The Job that created it (its `batch.kubernetes.io/job-name` label); "" for a pod no Job created."""
        return self.labels.get(JOB_NAME_LABEL, "")

    def as_container(self, c: Container) -> Pod:
        """The pod as its container `c` sees it: the same pod, with `c`'s command, env, image, mounts and limits (what
        `container.prepare` reads), so every container of a pod is prepared and run the same way."""
        fields = c.pod_fields() | ({"devices": c.chips} if c.chips else {})  # an accelerator container its own chips
        return replace(self, **fields, container_ports=(), others=(), processes=None)  # type: ignore[arg-type]

    @property
    def readiness_probe(self) -> bool:
        """Its JAX container declares a readinessProbe: Ready, hence in DNS, only once it passes."""
        return any(p.kind == "readiness" for p in self.probes)

    @property
    def wrapper(self) -> str | None:
        """The script of an entrypoint wrapper — `sh -c '<script ending in exec "$@">' NAME PROGRAM...`, which sets
        up the env and then execs its arguments — or None. The built-in probe stands in for the program it execs."""
        if len(self.command) >= 3 and Path(self.command[0]).name in ("sh", "bash", "dash") and self.command[1] == "-c":
            script = self.command[2].rstrip().rstrip(";").rstrip()
            if script.endswith('exec "$@"'):
                return self.command[2]
        return None

    def exports(self, name: str) -> bool:
        """Whether its entrypoint wrapper exports `name` (known only once it runs)."""
        return self.wrapper is not None and re.search(rf"\bexport\s+{re.escape(name)}=", self.wrapper) is not None


@dataclass(frozen=True)
class RestartPolicy:
    """The workload's own failure semantics, as its controller applies them."""

    kind: str  # "jobset" | "job" (a Training Operator v1 JAXJob maps onto "job": see controllers/jaxjob.py)
    max_restarts: int = 0  # JobSet failurePolicy.maxRestarts: whole-group restarts
    backoff_limit: int | None = 0  # Job backoffLimit (controllers/job_failure.py tolerated); None: no limit
    backoff_limit_per_index: int | None = None  # Job backoffLimitPerIndex
    max_failed_indexes: int | None = None  # Job maxFailedIndexes: more failed indexes fail the Job at once
    pod_failure_rules: tuple[Mapping, ...] = ()  # Job podFailurePolicy.rules, verbatim
    in_place: bool = False  # pod restartPolicy OnFailure/Always: the kubelet restarts the container in its pod
    active_deadline: int | None = None  # Job activeDeadlineSeconds: from the Job's start, whatever its retries
    jobset_rules: tuple[Mapping, ...] = ()  # JobSet failurePolicy.rules, verbatim (controllers/failure_policy.py)
    failure_policy: bool = False  # the JobSet has a failurePolicy (without one, a failed Job fails it: FailedJobs)
    child_jobs: tuple[tuple[str, RestartPolicy], ...] = ()  # JobSet: per replicatedJob, its Jobs' own ("job")
    operator: str = ""  # "JAXJob": the Training Operator, not the Job controller, writes the Failed condition

    def job(self, rjob: str) -> RestartPolicy:
        """The semantics of the Job a pod of replicatedJob `rjob` belongs to: this one for a Job, else the JobSet's
        child Jobs' (one that fails at its first failed pod where `rjob` is not listed)."""
        if self.kind == "job":
            return self
        return dict(self.child_jobs).get(rjob, RestartPolicy("job"))

    @property
    def unlimited(self) -> bool:
        """No controller limit ends a restart loop (a JAXJob restarting OnFailure with no backoffLimit)."""
        return self.kind == "job" and self.backoff_limit is None and self.backoff_limit_per_index is None


@dataclass(frozen=True)
class Restart:
    """How a failed attempt's pods start again, as its controllers decided: the kubelet restarts their containers
    in place (pod restartPolicy OnFailure: same pods, names and IPs), else they are recreated (new names and IPs);
    `jobset`: the JobSet recreated its child Jobs (status.restarts + 1, their failure counts anew), `counted`
    towards its maxRestarts or not (a ...IgnoreMaxRestarts rule)."""

    in_place: bool = False
    jobset: bool = False
    counted: bool = False

    @property
    def words(self) -> str:
        """As the report says it."""
        if self.jobset:
            return "JobSet restart" + ("" if self.counted else " (not counted towards maxRestarts)")
        return "restarted in place" if self.in_place else "pods recreated"


@dataclass(frozen=True)
class Success:
    """When the workload is complete before every pod has succeeded (a JobSet's or an Indexed Job's successPolicy):
    once `needed` of `jobs` (each a child Job's pod positions in the workload; for a Job's rule, single indexes) have
    every pod succeeded; its controller then deletes what is still running. None: every pod must succeed."""

    jobs: tuple[tuple[int, ...], ...]
    needed: int
    rule: str  # as the report names it: "successPolicy All of [workers]"

    def met(self, succeeded: Sequence[bool]) -> bool:
        return sum(all(succeeded[i] for i in job) for job in self.jobs) >= self.needed


@dataclass(frozen=True)
class Gate:
    """When some of a workload's pods may be created (a JobSet's `dependsOn` and `startupPolicy: InOrder`): the
    pods at positions `pods` once every Job of `jobs` (each its pods' positions) is `status`: "Ready" (each of its
    pods ready, or succeeded), "Complete" (each succeeded)."""

    pods: tuple[int, ...]
    jobs: tuple[tuple[int, ...], ...]
    status: str
    rule: str  # as the report names it: "dependsOn initializer: Complete"


class QueueingStrategy(StrEnum):
    """A ClusterQueue's spec.queueingStrategy (kueue apis/kueue/v1beta1 clusterqueue_types.go): under StrictFIFO the
    head of the queue blocks the workloads behind it while it does not fit; under BestEffortFIFO (the default) one
    behind it that fits is admitted."""

    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"


@dataclass(frozen=True)
class Quota:
    """What a workload Kueue admits takes of its ClusterQueue's quota while it runs: per (flavor, resource), its usage
    and the most the queue may take of it (its nominal quota and what its cohort lends it: `Cohorts.most`); and where
    it stands in the queue (its priority, the queue's strategy)."""

    cluster_queue: str
    strategy: QueueingStrategy
    priority: int
    usage: tuple[tuple[str, str, Fraction], ...]  # (flavor, resource, amount)
    most: tuple[tuple[str, str, Fraction], ...]  # (flavor, resource, the most the queue may take of it)


class Hold(StrEnum):
    """What holds a queued workload (or, for CHECK, what it waits for once its quota is reserved)."""

    QUEUE = "queue"  # its LocalQueue or ClusterQueue is missing, or the ClusterQueue does not admit its namespace
    PRIORITY = "priority"  # its WorkloadPriorityClass is missing: no Workload exists
    INACTIVE = "inactive"  # its ClusterQueue is inactive (a flavor, an AdmissionCheck or a Topology it names)
    QUOTA = "quota"  # no flavor has room for all its pods, its cohort's lendable quota included
    TOPOLOGY = "topology"  # no flavor can take its podset topology request
    FLAVOR = "flavor"  # no flavor suits its pods' nodeSelector or tolerations
    CHECK = "check"  # admitted once its ProvisioningRequest AdmissionCheck(s) are Ready


@dataclass(frozen=True)
class Admission:
    """Kueue's decision on one workload (`kueue.scheduler.admit`): admitted (with what it took), not checked, or
    suspended (why, and the fix)."""

    admitted: bool
    note: str
    fix: str = ""
    provisioning: tuple[str, ...] = ()  # its ProvisioningRequest checks, which the engine plays (`provisioned`)
    held: Hold | None = None  # what holds it (not admitted), or CHECK (admitted after its provisioning checks)
    counts: tuple[int, ...] | None = None  # partially admitted: the pods of each pod set that run at once
    quota: Quota | None = None  # what it takes of its ClusterQueue's quota while it runs (`quotas.Quotas`)


@dataclass(frozen=True)
class Workload:
    """A JobSet, Indexed Job, JAXJob or TrainJob and the pods its controller(s) create, in global-index order."""

    kind: str  # "JobSet" | "Job" | "JAXJob" | "TrainJob"
    namespace: str
    name: str
    pods: tuple[Pod, ...]
    groups: int  # JobSet Jobs (replicas summed) / TPU slices; 1 for a Job: those of its JAX processes (`group`)
    hosts_per_group: int  # pods per Job (completions), of its JAX processes' first Job
    chips_per_host: int  # devices per JAX pod (for the probe's hardware-shaped mesh)
    restart: RestartPolicy
    problems: tuple[Problem, ...] = ()  # static contract problems: DNS, ports, counts, rank env
    notes: tuple[str, ...] = ()  # what was decided or not checked on the way (Kueue's admission)
    success: tuple[Success, ...] = ()  # complete before every pod has succeeded once one is met (successPolicy)
    suspended: str | None = None  # the field that suspends it ("spec.suspend"), outside Kueue: no pod is created
    # Kueue's ProvisioningRequest AdmissionChecks it waits for, quota reserved, before Kueue admits it (--provision)
    provisioning: tuple[str, ...] = ()
    gates: tuple[Gate, ...] = ()  # pods created only once other Jobs are ready or complete (a JobSet's dependsOn)
    waves: tuple[tuple[tuple[int, ...], int], ...] = ()  # (a Job's pod positions, its parallelism) where that is less
    # than its completions: its controller keeps at most that many of its pods active, the lowest index first
    queued: Admission | None = None  # Kueue's decision (`kueue.scheduler.admit`); None: no queue-name label
    others: frozenset[int] = frozenset()  # positions of its pods that are not JAX processes (`jax.processes`): no
    # part of JAX's group, no contract; a stand-in that stays up under the probe, their own command under --run-command
    undetermined: str | None = None  # under the probe: why its verdict cannot be known before its commands run (the
    # contract is computed by a command: `jax.processes.computes`), where nothing else is wrong

    @cached_property
    def group(self) -> tuple[Pod, ...]:
        """Its JAX processes' pods, in rank order: its pods less `others`."""
        return tuple(p for p in self.pods if p.global_index not in self.others) if self.others else self.pods

    @cached_property
    def process_count(self) -> int:
        """The processes of its JAX group: each JAX pod's (`Pod.processes`)."""
        return sum(len(p.process_devices) for p in self.group)

    def rank_of(self, pod: Pod) -> int:
        """The JAX rank of `pod`'s (first) process, as the manifests define the group: the processes of the JAX pods
        before it (`Pod.rank`, set by the control plane; its place in the workload for a pod made without it)."""
        return pod.rank if pod.rank is not None else pod.global_index

    @property
    def quota(self) -> Quota | None:
        """What it takes of its ClusterQueue's quota while it runs, where Kueue admits it."""
        return self.queued.quota if self.queued is not None and self.queued.admitted else None

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


@dataclass(frozen=True)
class EmulatedCluster:
    """Everything the manifests create, plus the DNS they make resolvable."""

    workloads: tuple[Workload, ...]
    hosts: Mapping[str, str] = field(default_factory=dict)  # fully-qualified DNS name -> ip (what /etc/hosts gets)
    objects: tuple[
        Mapping, ...
    ] = ()  # what the API server holds (inputs and what the controllers made), when asked for
    problems: tuple[Problem, ...] = ()  # manifest-level problems (unsupported kinds, parse errors)
    # the DNS records (name -> ip) its Services (the manifests' and its controllers') make of whichever pods live
    records_of: Callable[[Sequence[Pod]], Mapping[str, str]] | None = field(default=None, compare=False)


class Findings:
    """Repeated problems collapsed by kind: the first one, with how many other pods (or names) share it,
    so a 6,144-pod workload with one mistake reports one line, not 6,144."""

    def __init__(self, noun: str = "pod") -> None:
        self._first: dict[str, Problem] = {}
        self._count: Counter[str] = Counter()
        self._noun = noun

    def add(self, key: str, problem: Problem | Callable[[], Problem]) -> None:
        """One more of `key`; its first problem is kept. `problem` may be a function that makes it, called at once
        and only for the first, so a message costly to build is built once. (A lambda in a loop binds the loop's
        values as defaults; mypy cannot type those, python/mypy#15459, hence the `type: ignore`s at the callers.)"""
        if key not in self._first:
            self._first[key] = problem if isinstance(problem, Problem) else problem()
        self._count[key] += 1

    def extend(self, items: Iterable[tuple[str, Problem]]) -> None:
        for key, problem in items:
            self.add(key, problem)

    def problems(self) -> list[Problem]:
        out = []
        for key, p in self._first.items():
            more = self._count[key] - 1
            out.append(
                p
                if not more
                else replace(p, message=f"{p.message} (and {more} more {self._noun}{'s' if more > 1 else ''})")
            )
        return out
