"""The static contract checks: would the JAX processes of a workload find their coordinator
(the name resolves, to rank 0, on the port rank 0 binds; the ports a container or a headless Service declares are
informational on a cluster, only noted), agree on the process count, and each know a distinct rank in 0..N-1 —
read from the env exactly as
`jax.distributed.initialize()` and its cluster detectors read it (jax/_src/distributed.py,
jax/_src/clusters/cluster.py, cloud_tpu_cluster.py and k8s_cluster.py, 0.10.2), plus the Training Operator v1's
COORDINATOR_* contract. Where no env names the ranks, JAX's Kubernetes detection (`K8sCluster`) may: then each Job
is a group of its own, checked by itself (`Checker.k8s_groups`).

What JAX reads, and so what is checked (jax-ml/jax v0.10.2): `State.initialize` (jax/_src/distributed.py) takes
JAX_COORDINATOR_ADDRESS as it is, port and all; JAX_COORDINATOR_PORT is read only by
`ClusterEnv.auto_detect_unset_distributed_params` (jax/_src/clusters/cluster.py), and only when no coordinator
address was given, as the port of the coordinator a detected cluster (`GkeTpuCluster`, `K8sCluster`,
`SlurmCluster`, ...) names. So a JAX_COORDINATOR_ADDRESS without a port is a refusal wherever JAX reads it itself:
under the probe, which initializes from the env, and under `--run-command` for a command that is a bare
`jax.distributed.initialize()`. xpk's GPU JobSets set JAX_COORDINATOR_ADDRESS to a host and JAX_COORDINATOR_PORT
beside it, which their program joins (`host:port`) itself: under `--run-command`, where the simulator cannot know
what the program does, that pair is a note, not a refusal, and still checked as the address it makes (the host
resolves to rank 0, and a port rank 0 or its Service does not declare is noted: `joined`).

Each problem says what is wrong and how to fix it; repeated problems collapse (`model.Findings`). Why a name does
not resolve is `resolution`'s to say; whether K8sCluster can work in a pod (its token, RBAC), `k8s_access`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property

from jaxinfra.errors import Problem
from jaxinfra.upstream import JAXJOB_PORT_NAME, JOB_COMPLETION_INDEX
from jaxinfra_sim.core import model
from jaxinfra_sim.core.inputs import Objects, Service
from jaxinfra_sim.jax.env import (
    BARE_INITIALIZE,
    JAX_DEFAULT_TPU_PORT,
    Address,
    appended_hint,
    coordinator,
    count_of,
    joined,
    rank_of,
    reads_env,
    split_hostport,
    v1_coordinator,
)
from jaxinfra_sim.jax.k8s_access import K8sAccess
from jaxinfra_sim.jax.k8s_detection import K8S_DETECTED, K8S_DETECTOR, k8s_coordinator, k8s_job
from jaxinfra_sim.jax.processes import COMPUTED_BY_COMMAND, Computed, computes
from jaxinfra_sim.network.dns import ClusterDns
from jaxinfra_sim.network.resolution import Resolution, fqdn


class Checker:
    """The static contract checks of one workload against the emulated DNS."""

    def __init__(
        self,
        wl_id: str,
        pods: Sequence[model.Pod],
        dns: ClusterDns,
        objects: Objects,
        services: Mapping[tuple[str, str], Service],
        contract: bool = True,
        k8s_client: bool = True,
        parallelism: Mapping[str, int] | None = None,
    ):
        self.id, self.pods, self.dns, self.objects, self.services = wl_id, pods, dns, objects, services
        self.contract = contract  # False: the containers' own commands may find rank and coordinator elsewhere
        self.k8s_client = k8s_client  # the pods' Python can import `kubernetes` (Options.k8s_client)
        self.parallelism = parallelism or {}  # each Job's spec.parallelism, by name: K8sCluster's process count
        self.findings = model.Findings()
        self.notes: dict[str, str] = {}  # what the checks could not know, and assumed (one per kind)
        # the contract's env a pod lacks where its command may compute it (`processes.computes`): by variable, the
        # first such pod and how; what only running the command can check (`undetermined`)
        self.computed: dict[str, tuple[model.Pod, Computed]] = {}
        self.rank_of = [rank_of(p) for p in pods]
        self.names = Resolution(wl_id, pods, dns, objects.namespaces, services)
        self.access = K8sAccess(objects, k8s_client)

    @cached_property
    def rank0(self) -> model.Pod:
        """The pod that hosts the coordinator: the one with rank 0, else the first (the checks run only on a
        workload with pods)."""
        zero = [p for p, r in zip(self.pods, self.rank_of) if r and r[1] == 0]
        return zero[0] if len(zero) == 1 else self.pods[0]

    def _path(self, pod: model.Pod, var: str) -> str:
        return f"{self.id} pod {pod.hostname} env {var}"

    # --- JAX's Kubernetes detection -----------------------------------------------------
    @cached_property
    def k8s_groups(self) -> dict[str, list[model.Pod]] | None:
        """The JAX groups K8sCluster forms, one per Job (each pod's Job by name, pods in index order), where no pod's
        env names its rank (the probe then leaves it to JAX's detection) and K8sCluster finds every pod's; else None.
        Only under the probe: under --run-command, what the programs pass JAX is not known here."""
        if not self.contract or any(
            r is not None or p.exports("JAX_PROCESS_ID") or p.processes is not None
            for p, r in zip(self.pods, self.rank_of)
        ):
            return None
        if any(self.access.unmet(p) is not None for p in self.pods):
            return None
        groups: dict[str, list[model.Pod]] = {}
        for pod in self.pods:
            groups.setdefault(k8s_job(pod) or "", []).append(pod)
        return groups

    def _k8s_coordinators(self, groups: Mapping[str, list[model.Pod]]) -> None:
        """Each group's coordinator as K8sCluster names it, checked as an env's address is, against the group's own
        rank 0 (its Job's pod of index 0); problems collapse across groups (one line, "and N more pods")."""
        for pods in groups.values():
            sub = Checker(self.id, pods, self.dns, self.objects, self.services, self.contract, self.k8s_client)
            sub.findings, sub.notes = self.findings, self.notes
            sub.rank_of = [(JOB_COMPLETION_INDEX, p.completion_index, str(p.completion_index)) for p in pods]
            for pod in pods:
                found = k8s_coordinator(pod)
                if found is not None:
                    sub._address(pod, Address(K8S_DETECTOR, found.raw, found.host, found.port), key=K8S_DETECTOR)

    def _k8s_note(self, groups: Mapping[str, list[model.Pod]]) -> None:
        first = next(iter(groups.values()))[0]
        address = coordinator(first) or k8s_coordinator(first)
        where = address.raw if address is not None else "?"
        note = (
            f"{self.id}: no env names the ranks, so {K8S_DETECTED} finds each pod's from its Job "
            f"(jax 0.10.2): rank JOB_COMPLETION_INDEX, process count the Job's parallelism, coordinator {where}"
        )
        if len(groups) > 1:
            sizes = sorted({len(ps) for ps in groups.values()})
            each = f"{sizes[0]} process{'es' if sizes[0] > 1 else ''} each" if len(sizes) == 1 else f"{sizes} processes"
            note += (
                f"; so each of its {len(groups)} child Jobs is a JAX group of its own ({each}), not one "
                f"group of {len(self.pods)}, and the probe checks each group by itself (for one group, set "
                "JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID)"
            )
        self.notes.setdefault("k8s", note)

    # --- what the command computes -----------------------------------------------------
    def _computed(self, pod: model.Pod, var: str) -> bool:
        """Whether `pod`'s command may compute `var`, which its env lacks (`processes.computes`): then it is recorded
        for `undetermined`, not a problem; or whether a launcher the command names starts its processes
        (`Pod.processes`), which tells each its rank, the group's size and a coordinator, as the probe does in its
        place."""
        if pod.processes is not None:
            self.notes.setdefault(
                "launched",
                f"{self.id}: {var} is not in the env the manifests give pod {pod.hostname}: its launcher "
                f"({pod.processes.source}) tells each process its part of the contract, which the probe infers (rank "
                "= the pod's first + the local index, the coordinator rank 0's pod); --run-command runs the "
                "command's own",
            )
            return True
        how = computes(pod)
        if how is not None:
            self.computed.setdefault(var, (pod, how))
        return how is not None

    @property
    def undetermined(self) -> str | None:
        """Why the probe cannot give this workload's verdict: the contract's env it lacks may be computed by its
        commands, which only `--run-command` runs (None: the env holds what JAX needs, or its lack is a problem)."""
        if not self.computed:
            return None
        pod, how = next(iter(self.computed.values()))
        names, argv = " and ".join(self.computed), (*pod.command, *pod.args)
        one = len(self.computed) == 1
        return (
            f"{COMPUTED_BY_COMMAND}: {names} {'is' if one else 'are'} not in the env the manifests give pod "
            f"{pod.hostname}, and its command may compute {'it' if one else 'them'} ({how}: {' '.join(argv[:2])}"
            f"{' …' if len(argv) > 2 else ''}); the probe cannot know what it computes"
        )

    # --- coordinator --------------------------------------------------------------------
    def coordinator(self) -> None:
        groups = self.k8s_groups
        if groups is not None and all(coordinator(p) is None for p in self.pods):
            self._k8s_coordinators(groups)
            return
        for pod in self.pods:
            address = coordinator(pod)
            if address is None:
                if len(self.pods) > 1 and self.contract and not self._computed(pod, "JAX_COORDINATOR_ADDRESS"):
                    self.findings.add(
                        "no-coordinator",
                        lambda p=pod: Problem(  # type: ignore[misc]  # python/mypy#15459
                            self._path(p, "JAX_COORDINATOR_ADDRESS"),
                            None,
                            "no coordinator address: JAX_COORDINATOR_ADDRESS is unset and the pod is not a TPU pod "
                            "with TPU_WORKER_HOSTNAMES",
                            "set JAX_COORDINATOR_ADDRESS to rank 0's DNS name and port, "
                            f"e.g. {fqdn(self.rank0)}:{JAX_DEFAULT_TPU_PORT}",
                        ),
                    )
                continue
            self._address(pod, address)
            if address.var == "JAX_COORDINATOR_ADDRESS" and (v1 := v1_coordinator(pod)):
                self._address(pod, v1)  # both contracts set: both must hold
            if address.var == "JAX_COORDINATOR_ADDRESS" and pod.env.get("MEGASCALE_COORDINATOR_ADDRESS"):
                raw = pod.env["MEGASCALE_COORDINATOR_ADDRESS"]  # libtpu's DCN coordinator: also rank 0
                self._address(pod, Address("MEGASCALE_COORDINATOR_ADDRESS", raw, raw.split(":")[0], None))

    def _address(self, pod: model.Pod, address: Address, key: str | None = None) -> None:
        """Check one pod's coordinator `address`; `key`: what its problems collapse by in place of the host (the
        coordinators K8sCluster names differ per group)."""
        path = (
            f"{self.id} pod {pod.hostname} K8sCluster coordinator"
            if address.var == K8S_DETECTOR
            else self._path(pod, address.var)
        )
        host_key = key or address.host
        pair = joined(pod) if address.var == "JAX_COORDINATOR_ADDRESS" and not self.contract else None
        if pair is not None and not reads_env(pod):
            if pair.port is None:
                self.findings.add(
                    "JAX_COORDINATOR_PORT|not-a-port",
                    lambda: Problem(
                        self._path(pod, "JAX_COORDINATOR_PORT"),
                        pod.env.get("JAX_COORDINATOR_PORT"),
                        "JAX_COORDINATOR_PORT is not a port number (1 to 65535)",
                        "set it to the port rank 0's coordinator listens on",
                    ),
                )
                return
            self.notes.setdefault(
                "joined",
                f"{self.id}: JAX_COORDINATOR_ADDRESS {address.raw!r} has no port and JAX_COORDINATOR_PORT "
                f"{pair.port} is beside it: jax.distributed.initialize() reads JAX_COORDINATOR_PORT only when it "
                "detects the cluster itself, so the program must join them (host:port) and pass "
                f"coordinator_address; checked as {pair.host}:{pair.port}",
            )
            address = pair
        elif address.var == "JAX_COORDINATOR_ADDRESS" and address.port is None:
            hint, fix = appended_hint(address.raw)
            if port := pod.env.get("JAX_COORDINATOR_PORT"):  # beside an address, JAX does not read it
                hint += (
                    f"; JAX_COORDINATOR_PORT ({port}) is read only when JAX detects the cluster itself, with no "
                    "address given" + ("" if self.contract else f", and this command calls {BARE_INITIALIZE}")
                )
                fix = fix or f"set JAX_COORDINATOR_ADDRESS to {address.host}:{port}"
            self.findings.add(
                f"{address.var}|port-missing",
                lambda: Problem(
                    path,
                    address.raw,
                    f"JAX_COORDINATOR_ADDRESS must be host:port (jax.distributed.initialize does not add a port){hint}",
                    fix or f"append the coordinator port, e.g. {address.host}:{JAX_DEFAULT_TPU_PORT}",
                ),
            )
            return
        if address.var == "COORDINATOR_ADDRESS" and address.port is None:
            self.findings.add(
                "COORDINATOR_PORT|not-a-port",
                lambda: Problem(
                    self._path(pod, "COORDINATOR_PORT"),
                    pod.env.get("COORDINATOR_PORT"),
                    "COORDINATOR_PORT is not a port number",
                    f"name the jax container's coordinator port {JAXJOB_PORT_NAME}",
                ),
            )
            return
        ip, svc = self.names.resolve(pod, address.host)
        if ip is None:

            def unresolved() -> Problem:  # diagnosed once, not once per pod
                message, fix = self.names.diagnose(address.host, pod, self.rank0)
                if address.var == K8S_DETECTOR and fix.startswith("address rank 0 as "):
                    fix = fix.partition(", or ")[2] or fix  # JAX names the host: only the Service can change
                named = (
                    "K8sCluster names the coordinator <job>-0.<jobset name> (a JobSet's child Job) or "
                    "<job>-0.<subdomain>, and "
                    if address.var == K8S_DETECTOR
                    else ""
                )
                return Problem(
                    path,
                    address.raw,
                    f"{named}host '{address.host}' does not resolve from namespace '{pod.namespace}': {message}",
                    fix,
                )

            self.findings.add(f"{address.var}|unresolved|{host_key}", unresolved)
            return
        if svc is not None and not svc.publish_not_ready and self.rank0.readiness_probe:
            # A Service that does not publish not-ready addresses names rank 0 once it is Ready: without a
            # readinessProbe, once its containers run (kubernetes pkg/kubelet/status generate.go
            # GeneratePodReadyCondition), which the others' lookups, retried until JAX's initialization timeout,
            # outwait (GKE's own multi-host TPU Job, ai-ml/gke-tpu-dynamic-slicing, relies on it); with one, only once
            # the probe passes, which a process waiting for its peers may never let happen.
            fix = (
                f"remove the readinessProbe from container '{self.rank0.container}'"
                if svc.operator_owned  # the operator's Service cannot be changed
                else f"set publishNotReadyAddresses: true on the Service, or remove the readinessProbe from container "
                f"'{self.rank0.container}'"
            )
            self.findings.add(
                f"{address.var}|not-ready-probe|{svc.name}",
                lambda: Problem(
                    f"{self.id} pod {self.rank0.hostname} container {self.rank0.container} readinessProbe",
                    True,
                    f"'{address.host}' resolves only once rank 0 passes its readinessProbe "
                    f"({svc.origin} does not publish not-ready addresses), "
                    "but the other processes look it up while it starts",
                    fix,
                ),
            )
        if ip != self.rank0.ip:
            other = self.dns.by_ip.get(ip)
            what = f"pod {other.hostname} of {other.workload}" if other else ip
            self.findings.add(
                f"{address.var}|not-rank0|{host_key}",
                lambda: Problem(
                    path,
                    address.raw,
                    f"'{address.host}' resolves to {what}, not to rank 0 (pod {self.rank0.hostname}), "
                    "which hosts the coordinator",
                    f"point it at rank 0: {fqdn(self.rank0)}" + (f":{address.port}" if address.port else ""),
                ),
            )
        if address.port is not None and address.var != "MEGASCALE_COORDINATOR_ADDRESS":
            self._ports(pod, address, svc)

    # --- ports --------------------------------------------------------------------------
    def _ports(self, pod: model.Pod, address: Address, svc: Service | None) -> None:
        """Whether the process connects where rank 0's coordinator binds: rank 0 binds `[::]:<its address's port>`
        unless JAX_COORDINATOR_BIND_ADDRESS says otherwise (jax/_src/distributed.py). The ports a container declares
        and a headless Service's ports (`svc`, the one the name resolved through) are only noted: a pod is reached on
        any port it listens on, declared or not (kubernetes api core/v1 types.go Container.Ports: "Not specifying a
        port here DOES NOT prevent that port from being exposed"), and a headless Service's names resolve to the pods'
        own addresses, no proxy in between (kubernetes website content/en/docs/concepts/services-networking/
        service.md, "Headless Services"), and those are the only Services `Resolution.resolve` answers with."""
        port = address.port
        bind = pod.env.get("JAX_COORDINATOR_BIND_ADDRESS")
        if bind and split_hostport(bind)[1] != port:
            self.findings.add(
                "bind-port",
                lambda: Problem(
                    self._path(pod, "JAX_COORDINATOR_BIND_ADDRESS"),
                    bind,
                    f"rank 0 binds the coordinator on port {split_hostport(bind)[1]} "
                    f"but processes connect to {address.raw}",
                    f"use the same port in both, e.g. [::]:{port}",
                ),
            )
        # Neither a container's declared ports nor a headless Service's restrict a connection on a cluster: a
        # container's `ports` are informational (kubernetes staging/src/k8s.io/api/core/v1/types.go Container.Ports:
        # "Not specifying a port here DOES NOT prevent that port from being exposed"), and a headless Service's name
        # resolves to the pods themselves, which kube-proxy does not handle (the Services docs' "Headless
        # Services"). So a coordinator port that neither declares is a note, not a problem: JAX's own examples
        # declare another (jax-ml/jax examples/k8s/mnist-training/jobset.yaml declares 8471 and 8080, and its TPU
        # coordinator is JAX's default port). A NetworkPolicy that admits only some ports is enforced as the pods run.
        if self.rank0.container_ports and port not in self.rank0.container_ports:
            self.notes.setdefault(
                "container-port",
                f"{self.id}: the coordinator listens on port {port} ({address.var}), which rank 0's container "
                f"{self.rank0.container} does not declare (ports {list(self.rank0.container_ports)}): on a cluster "
                "a container's ports are informational and any port it listens on is reachable, so the processes "
                "connect all the same",
            )
        if svc is not None and svc.ports and not any(port in (p, t) for p, t in svc.ports):
            self.notes.setdefault(
                "service-port",
                f"{self.id}: Service '{svc.name}' declares ports {[p for p, _ in svc.ports]} but not the "
                f"coordinator port {port} ({address.var}): it is headless, so its names resolve to the pods "
                "themselves and its ports restrict no connection",
            )
        if pod is self.rank0 or address.var != "JAX_COORDINATOR_ADDRESS":
            return
        own, own_bind = coordinator(self.rank0), self.rank0.env.get("JAX_COORDINATOR_BIND_ADDRESS")
        listens = split_hostport(own_bind)[1] if own_bind else own.port if own is not None else None
        if listens is not None and listens != port:
            self.findings.add(
                "rank0-port",
                lambda: Problem(
                    self._path(pod, address.var),
                    address.raw,
                    f"rank 0's coordinator listens on port {listens} (pod {self.rank0.hostname}), but this process "
                    f"connects to port {port}, where nothing listens",
                    f"give every pod the same coordinator port, {listens}",
                ),
            )

    # --- counts and ranks ---------------------------------------------------------------
    def counts(self) -> None:
        n = self.processes
        for job, pods in (self.k8s_groups or {}).items():
            # parallelism < completions is the controller's problem already (the group never initializes)
            size = len(pods)
            if (parallelism := self.parallelism.get(job)) is not None and parallelism > size:
                self.findings.add(
                    "count|K8sCluster",
                    lambda j=job, k=parallelism, m=size: Problem(  # type: ignore[misc]  # python/mypy#15459
                        f"{self.id} Job {j} parallelism",
                        k,
                        f"{K8S_DETECTED} takes the process count from the Job's parallelism ({k}), but the Job has "
                        f"{m} pods, so its group waits for processes that never start",
                        f"set parallelism: {m}",
                    ),
                )
        for pod in self.pods:
            found = count_of(pod)
            # the TPU detector counts hosts (pods), the contract's env every process
            if found and found[1] != (len(self.pods) if found[0] == "TPU_WORKER_HOSTNAMES" else n):
                source, _, raw = found
                self.findings.add(
                    f"count|{source}",
                    lambda p=pod, s=source, r=raw: Problem(  # type: ignore[misc]  # python/mypy#15459
                        self._path(p, s),
                        r,
                        f"the process count is {r} but the workload has {self._processes_words}",
                        f"set {s} to {n}"
                        if s in ("JAX_NUM_PROCESSES", "NUM_PROCESSES")
                        else "make the slices match the pods",
                    ),
                )

    @property
    def processes(self) -> int:
        """The JAX processes of the group: each pod's (`Pod.processes`)."""
        return sum(len(p.process_devices) for p in self.pods)

    @property
    def _processes_words(self) -> str:
        n = self.processes
        if n == len(self.pods):
            return f"{n} pods"
        return f"{n} JAX processes ({len(self.pods)} pods)"

    def ranks(self) -> None:
        n = self.processes
        if (groups := self.k8s_groups) is not None:
            # each group's ranks are its Job's completion indexes: distinct, and 0..pods-1 (counts checks the count)
            self._k8s_note(groups)
            return
        launched = [p for p, r in zip(self.pods, self.rank_of) if p.processes is not None and r is None]
        if any(p.processes is not None for p in self.pods):  # a launcher tells its processes their ranks
            if launched:
                self._computed(launched[0], "JAX_PROCESS_ID")
            return
        found = list(zip(self.pods, self.rank_of))
        # A rank an entrypoint wrapper exports is known when it runs: the probe checks it then.
        missing = [pod for pod, r in found if r is None and not pod.exports("JAX_PROCESS_ID")]
        if n > 1 and self.contract:  # a rank the command may compute is known only once it runs (`undetermined`)
            missing = [pod for pod in missing if not self._computed(pod, "JAX_PROCESS_ID")]
        if missing and (n > 1 or len(missing) < n) and self.contract:
            pod = missing[0]
            several_jobs = self.pods[-1].job_index > 0
            missing_fix = (
                "set JAX_PROCESS_ID from a fieldRef to metadata.annotations['batch.kubernetes.io/job-completion-index']"
                + (" plus job-index x pods per Job (compute it in the command)" if several_jobs else "")
            )
            tpu = (
                " (GKE injects the TPU env only into pods of an Indexed Job with a subdomain and parallelism > 1)"
                if pod.accelerator == "tpu"
                else ""
            )
            unmet = next((u for p in missing if (u := self.access.unmet(p)) is not None), None)
            if unmet is not None:
                why = f"; {K8S_DETECTED}, the detector that would find it, cannot work here: {unmet.condition}"
                rank_fix = (
                    f"{unmet.fix}, so that {K8S_DETECTED} finds the rank; or {missing_fix}"
                    if unmet.fix
                    else missing_fix
                )
            else:  # K8sCluster would find these pods' ranks, but the other pods' env names theirs
                why = f"; {K8S_DETECTED} would find theirs, but the other pods' env names their ranks"
                rank_fix = missing_fix
            self.findings.add(
                "rank-missing",
                lambda: Problem(
                    self._path(pod, "JAX_PROCESS_ID"),
                    None,
                    "rank env missing: neither JAX_PROCESS_ID nor the TPU detector env "
                    "(TPU_WORKER_ID + TPU_WORKER_HOSTNAMES) is set "
                    f"on {len(missing)} of {n} pods, so JAX cannot know this process's rank{tpu}{why}",
                    rank_fix,
                ),
            )
        ranks: dict[int, list[model.Pod]] = {}
        for pod, r in found:
            if r is None:
                continue
            source, rank, raw = r
            if rank is None:
                hint, fix = appended_hint(raw)
                self.findings.add(
                    f"rank-not-int|{source}",
                    lambda p=pod, s=source, v=raw, h=hint, f=fix: Problem(  # type: ignore[misc]  # python/mypy#15459
                        self._path(p, s),
                        v,
                        f"the rank is not an integer after resolution{h}",
                        f
                        or "use valueFrom.fieldRef.fieldPath: "
                        "metadata.annotations['batch.kubernetes.io/job-completion-index']",
                    ),
                )
                continue
            ranks.setdefault(rank, []).append(pod)
        if not ranks:
            return
        source = next(r[0] for _, r in found if r)
        dupes = {r: ps for r, ps in ranks.items() if len(ps) > 1}
        if dupes:
            dup, ps = min(dupes.items())
            self.findings.add(
                "rank-dup",
                lambda: Problem(
                    f"{self.id} env {source}",
                    dup,
                    f"rank {dup} is used by {len(ps)} pods "
                    f"({ps[0].hostname}, {ps[1].hostname}{', …' if len(ps) > 2 else ''}); "
                    f"{len(dupes)} ranks are duplicated in all",
                    "ranks must be distinct: for a JobSet with several Jobs, "
                    "add job-index x pods per Job to the completion index",
                ),
            )
        gaps = sorted(set(range(n)) - set(ranks))
        extra = sorted(r for r in ranks if not 0 <= r < n)
        if gaps or extra:
            self.findings.add(
                "rank-cover",
                lambda: Problem(
                    f"{self.id} env {source}",
                    (gaps or extra)[:5],
                    f"ranks must cover 0..{n - 1} exactly: missing {gaps[:5]}{'…' if len(gaps) > 5 else ''}, "
                    f"out of range {extra[:5]}",
                    f"derive the rank from the completion index so that {n} pods get 0..{n - 1}",
                ),
            )
