"""The kubelet: what it makes of a pod the controllers created — the container's env exactly as
it resolves it (downward API, ConfigMaps, Secrets, `$(VAR)` expansion, in order), the command
and args after expansion, the devices JAX will see — and the problems that would keep the
container from starting.

Source: kubernetes pkg/kubelet/kuberuntime/kuberuntime_container.go makeEnvironmentVariables,
third_party/forked/golang/expansion/expand.go. Not emulated (no effect on the JAX contract, or
unknowable from manifests): Service-link env vars (`<SVC>_SERVICE_HOST`; headless Services get
none anyway) and node allocatable (resourceFieldRef falls back to requests).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jaxinfra.errors import Problem
from jaxinfra_sim.apiserver.admission import service_account
from jaxinfra_sim.controllers.base import ChildJob, Draft, Identity
from jaxinfra_sim.core import inputs, model, security
from jaxinfra_sim.core.inputs import Objects, fake_uid, quantity, str_value, to_int
from jaxinfra_sim.kubelet import qos, volumes
from jaxinfra_sim.kubelet.downward import PodFacts
from jaxinfra_sim.node import cgroups
from jaxinfra_sim.platform import standins

_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")  # kubelet IsEnvVarName
MAX_CFS_QUOTA_US = 2**44 - 1
"""The largest CFS quota the kernel takes (cpu.max, cpu.cfs_quota_us): kernel/sched/core.c tg_set_cfs_bandwidth
refuses a quota over max_cfs_runtime = MAX_BW microseconds (EINVAL); kernel/sched/sched.h MAX_BW = 2^(64 - BW_SHIFT)
- 1, BW_SHIFT 20."""


def expand(text: str, lookup: Callable[[str], str | None]) -> str:
    """Kubernetes `$(VAR)` expansion: `$$` is a literal `$`, an unknown or unterminated reference stays verbatim.

    Same scanning rules as third_party/forked/golang/expansion (Expand, tryReadVariableName).
    """
    if "$" not in text:
        return text
    out, checkpoint, i, n = [], 0, 0, len(text)
    while i < n:
        if text[i] == "$" and i + 1 < n:
            out.append(text[checkpoint:i])
            nxt = text[i + 1]
            if nxt == "(":
                close = text.find(")", i + 2)
                if close < 0:
                    out.append("$(")
                    i += 1
                else:
                    var = text[i + 2 : close]
                    value = lookup(var)
                    out.append(value if value is not None else f"$({var})")
                    i = close
            else:
                out.append("$" if nxt == "$" else "$" + nxt)
                i += 1
            checkpoint = i + 1
        i += 1
    out.append(text[checkpoint:])
    return "".join(out)


class EnvResolver:
    """Resolves one container's env exactly as makeEnvironmentVariables does, recording problems."""

    def __init__(self, where: str, facts: PodFacts, objects: Objects, problems: list[tuple[str, Problem]]):
        self.where, self.facts, self.objects, self.problems = where, facts, objects, problems

    def _problem(self, kind: str, var: str, value: Any, message: str, fix: str) -> None:
        self.problems.append((f"env|{var}|{kind}", Problem(f"{self.where} env {var}", value, message, fix)))

    def _lookup(self, kind: str, ref: Mapping, var: str) -> str | None:
        """A configMapKeyRef/secretKeyRef value; None when absent (a problem unless optional)."""
        store = self.objects.config_maps if kind == "ConfigMap" else self.objects.secrets
        data = store.get((self.facts.namespace, ref.get("name", "")))
        key = ref.get("key", "")
        if data is not None and key in data:
            return data[key]
        if not ref.get("optional"):
            what = f"{kind} '{ref.get('name')}'" if data is None else f"key '{key}' of {kind} '{ref.get('name')}'"
            self._problem(
                f"{kind}-missing",
                var,
                ref.get("name"),
                f"{what} is not in the manifests (namespace '{self.facts.namespace}'): "
                "the kubelet cannot start the container",
                f"add the {kind} to the manifests, or mark the reference optional: true",
            )
        return None

    def _env_from(self, container: Mapping) -> dict[str, str]:
        env: dict[str, str] = {}
        for source in container.get("envFrom") or []:
            kind, ref = (
                ("ConfigMap", source["configMapRef"])
                if source.get("configMapRef")
                else ("Secret", source.get("secretRef") or {})
            )
            store = self.objects.config_maps if kind == "ConfigMap" else self.objects.secrets
            data = store.get((self.facts.namespace, ref.get("name", "")))
            if data is None:
                if not ref.get("optional"):
                    self._problem(
                        f"{kind}-missing",
                        "envFrom",
                        ref.get("name"),
                        f"{kind} '{ref.get('name')}' is not in the manifests (namespace '{self.facts.namespace}')",
                        f"add the {kind} to the manifests, or mark the envFrom optional: true",
                    )
                continue
            for key in sorted(data):  # a Go map: order unspecified; sorted for determinism
                name = source.get("prefix", "") + key
                if _ENV_NAME.fullmatch(name):
                    env[name] = data[key]
        return env

    def _value(self, entry: Mapping, container: Mapping, env: Mapping[str, str]) -> str | None:
        """One env entry's runtime value; None means the kubelet skips it (an optional, absent reference)."""
        var, value, source = entry.get("name", ""), entry.get("value"), entry.get("valueFrom") or {}
        if value not in (None, ""):
            if not isinstance(value, str):
                self._problem(
                    "value-type",
                    var,
                    value,
                    "env values must be strings: the API server rejects a YAML number or boolean",
                    f'quote it: value: "{str_value(value)}"',
                )
            return expand(str_value(value), env.get)
        if source.get("fieldRef"):
            path = source["fieldRef"].get("fieldPath", "")
            resolved = self.facts.field_ref(path)
            if resolved is None:
                self._problem(
                    "fieldRef",
                    var,
                    path,
                    "unsupported downward-API fieldPath for env",
                    "use metadata.name|namespace|uid, metadata.labels['k'], metadata.annotations['k'], spec.nodeName, "
                    "spec.serviceAccountName, status.podIP or status.hostIP",
                )
                return ""
            return resolved
        if source.get("resourceFieldRef"):
            return self.facts.resource(source["resourceFieldRef"], container)
        if source.get("configMapKeyRef"):
            return self._lookup("ConfigMap", source["configMapKeyRef"], var)
        if source.get("secretKeyRef"):
            return self._lookup("Secret", source["secretKeyRef"], var)
        return ""

    def resolve(self, container: Mapping, platform: Mapping[str, str], appended: Sequence[Mapping]) -> dict[str, str]:
        """Platform env first, then envFrom, then env in order (each `$(VAR)` sees only what came before),
        then what the Job controller appended."""
        env = dict(platform)
        env.update(self._env_from(container))
        for entry in [*(container.get("env") or []), *appended]:
            value = self._value(entry, container, env)
            if value is not None:
                env[entry.get("name", "")] = value
        return env


def devices(accelerator: str, count: Any, env: Mapping[str, str]) -> int:
    """Chips per host for TPU/GPU pods, else JAX_NUM_CPU_DEVICES, else 1."""
    if accelerator != "cpu":
        return max(1, int(quantity(count) or 1))
    return max(1, to_int(env.get("JAX_NUM_CPU_DEVICES"), 1))


def service_env(host: str, port: int) -> dict[str, str]:
    """The `kubernetes` Service's env the kubelet puts in every container, whatever enableServiceLinks says
    (pkg/kubelet/kubelet_pods.go getServiceEnvVarMap, pkg/kubelet/envvars FromServices)."""
    tcp = f"tcp://{host}:{port}"
    return {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": str(port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(port),
        "KUBERNETES_PORT": tcp,
        f"KUBERNETES_PORT_{port}_TCP": tcp,
        f"KUBERNETES_PORT_{port}_TCP_PROTO": "tcp",
        f"KUBERNETES_PORT_{port}_TCP_PORT": str(port),
        f"KUBERNETES_PORT_{port}_TCP_ADDR": host,
    }


def start_pod(
    draft: Draft,
    job: ChildJob,
    who: Identity,
    index: int,
    global_index: int,
    node: str,
    ip: str,
    platform: Mapping[str, str],
    api: tuple[str, int],
    token: bool,
    objects: Objects,
    problems: list[tuple[str, Problem]],
) -> model.Pod:
    """The pod `who` of `job` as the kubelet starts it on `node` with address `ip`: each container's env, command
    and args expanded, its mounts, securityContext and limits; the JAX container's devices; env problems go to
    `problems`.

    Beneath each container's own env: HOSTNAME (the container runtime sets it to the pod's hostname, the node's for
    a host-network pod) and the `kubernetes` Service's env for the API server at `api`; the platform's env (GKE's
    TPU variables) only in the JAX container, the one that requests the chips."""
    spec = job.pod_spec
    containers = [c for c in spec.get("containers") or [{}] if isinstance(c, Mapping)] or [{}]
    inits = [c for c in spec.get("initContainers") or [] if isinstance(c, Mapping)]
    jax = job.container
    host_network = bool(spec.get("hostNetwork"))
    account = service_account(spec)
    facts = PodFacts(
        who.name,
        draft.namespace,
        fake_uid("Pod", draft.namespace, who.name),
        who.labels,
        who.annotations,
        node,
        account,
        ip,
        containers,
    )
    where = f"{draft.id} pod {who.hostname}"
    base = {"HOSTNAME": node if host_network else who.hostname, **service_env(*api)}
    order = [
        *((f"spec.initContainers[{i}]", c) for i, c in enumerate(inits)),
        *((f"spec.containers[{i}]", c) for i, c in enumerate(containers)),
    ]
    mounts = volumes.resolve(where, spec, order, draft.namespace, who.annotations, facts, objects, problems)
    resolved = [
        _container(
            where,
            c is jax,
            path,
            c,
            spec,
            {**base, **platform} if c is jax else base,
            who.appended,
            m,
            facts,
            objects,
            problems,
        )
        for (path, c), m in zip(order, mounts)
    ]
    main = resolved[len(inits) + containers.index(jax)]
    accelerator, count = job.accelerator
    ports = tuple(int(p["containerPort"]) for p in jax.get("ports") or [] if str(p.get("containerPort", "")).isdigit())
    return model.Pod(
        workload=draft.id,
        namespace=draft.namespace,
        name=who.name,
        hostname=who.hostname,
        subdomain=job.subdomain,
        ip=ip,
        job_index=job.job_index,
        completion_index=index,
        global_index=global_index,
        labels=who.labels,
        annotations=who.annotations,
        **main.pod_fields(),  # type: ignore[arg-type]
        devices=devices(accelerator, count, main.env),
        accelerator=accelerator,
        container_ports=ports,
        port_names=tuple(p for c in (*containers, *inits) for p in named_ports(c)),
        node=node,
        host_network=host_network,
        service_account=account,
        token=token,
        grace_period=float(spec.get("terminationGracePeriodSeconds", 30)),
        host_aliases=tuple(
            (str(a.get("ip", "")), tuple(str(h) for h in a.get("hostnames") or ()))
            for a in spec.get("hostAliases") or ()
        ),
        others=tuple(c for c in resolved if c is not main),
        restart_policy=str(spec.get("restartPolicy") or "Always"),
        namespaces=namespaces(spec, [c for _, c in order]),
    )


def namespaces(spec: Mapping, containers: Sequence[Mapping]) -> model.PodNamespaces:
    """What the pod's spec says of the node's namespaces it shares and of its sysctls (`model.PodNamespaces`)."""
    sc = spec.get("securityContext")
    sysctls = sc.get("sysctls") if isinstance(sc, Mapping) else None
    users = spec.get("hostUsers")
    return model.PodNamespaces(
        sysctls=tuple(
            (str(s.get("name", "")), str_value(s.get("value", "")))
            for s in sysctls or ()
            if isinstance(s, Mapping) and s.get("name")
        )
        if isinstance(sysctls, list)
        else (),
        host_pid=spec.get("hostPID") is True,
        host_ipc=spec.get("hostIPC") is True,
        host_users=users if isinstance(users, bool) else None,
        share_process_namespace=spec.get("shareProcessNamespace") is True,
        host_ports=tuple(
            p["hostPort"]
            for c in containers
            for p in c.get("ports") or ()
            if isinstance(p, Mapping) and type(p.get("hostPort")) is int and p["hostPort"] > 0
        ),
    )


def _container(
    where: str,
    jax: bool,
    path: str,
    container: Mapping,
    pod_spec: Mapping,
    base: Mapping[str, str],
    appended: Sequence[Mapping],
    mounts: tuple[model.Mount, ...],
    facts: PodFacts,
    objects: Objects,
    problems: list[tuple[str, Problem]],
) -> model.Container:
    """One container (at `path` of the pod spec) as the kubelet starts it: env, command and args, securityContext,
    limits; the problems that would keep it from starting (the pod's `where`, the container's name added but for the
    JAX container)."""
    name = str(container.get("name", ""))
    env_where = where if jax else f"{where} container {name}"
    env = EnvResolver(env_where, facts, objects, problems).resolve(container, base, appended)
    working_dir = container.get("workingDir")
    if working_dir and not str(working_dir).startswith("/"):
        problems.append(
            (
                "workdir",
                Problem(
                    f"{where} container {name} workingDir",
                    working_dir,
                    "RunContainerError: the container runtime (runc) refuses a relative "
                    "working directory (its spec's process.cwd must be absolute)",
                    "make workingDir an absolute path, as the image's WORKDIR is",
                ),
            )
        )
    memory, cpu = cgroups.container_limits(container)
    if cpu is not None and cpu * cgroups.CFS_PERIOD_US // 1000 > MAX_CFS_QUOTA_US:
        problems.append(
            (
                "limit|cpu",
                Problem(
                    f"{where} container {name} resources.limits.cpu",
                    ((container.get("resources") or {}).get("limits") or {}).get("cpu"),
                    "RunContainerError: its CFS quota (millicores x 100 us a 100 ms period, the kubelet's "
                    "MilliCPUToQuota) is past the most the kernel takes, 2^44 - 1 us (about 175.9 million CPUs), "
                    "so the container runtime cannot create the container (and past 2^63 / 100,000 millicores "
                    "the kubelet's int64 quota overflows)",
                    "set a CPU limit a node can give, or none",
                ),
            )
        )
        cpu = None
    init = path.startswith("spec.initContainers")
    return model.Container(
        name=name,
        role=("sidecar" if container.get("restartPolicy") == "Always" else "init") if init else "main",
        image=str(container.get("image", "")),
        command=tuple(expand(str(a), env.get) for a in container.get("command") or ()) or _entrypoint(container),
        args=tuple(expand(str(a), env.get) for a in container.get("args") or ()),
        env=env,
        working_dir=working_dir,
        mounts=mounts,
        security=security.resolve(where, pod_spec, container, problems),
        memory_limit=memory,
        cpu_millis=cpu,
        probes=probes(container),
        oom_score_adj=qos.oom_score_adj(pod_spec, container),
        ephemeral_limit=str(((container.get("resources") or {}).get("limits") or {}).get("ephemeral-storage") or ""),
        ports={p.name: p.number for p in named_ports(container)},
        chips=int(quantity(inputs.accelerator(container)[1]) or 0),
    )


def named_ports(container: Mapping) -> tuple[model.NamedPort, ...]:
    """A container's named containerPorts, each with its protocol (TCP unless given)."""
    return tuple(
        model.NamedPort(str(p["name"]), str(p.get("protocol") or "TCP"), int(p["containerPort"]))
        for p in container.get("ports") or ()
        if isinstance(p, Mapping) and p.get("name") and str(p.get("containerPort", "")).isdigit()
    )


def _entrypoint(container: Mapping) -> tuple[str, ...]:
    """The image's ENTRYPOINT, which a container without `command` runs: known here only for the platform images the
    simulator stands in for (`platform.standins`); () otherwise."""
    found = standins.lookup(str(container.get("image", "")))
    return found.entrypoint if found is not None else ()


PROBES = (("startupProbe", "startup"), ("readinessProbe", "readiness"), ("livenessProbe", "liveness"))
_PROBE_NUMBERS = ("initialDelaySeconds", "periodSeconds", "timeoutSeconds", "successThreshold", "failureThreshold")


def probes(container: Mapping) -> tuple[model.Probe, ...]:
    """The container's probes as its prober runs them (pkg/kubelet/prober/prober.go runProbe): an exec command's
    $(VAR) expanded from the container's literal env values only (kubecontainer.ExpandContainerCommandOnlyStatic: no
    valueFrom, no downward API), the API server's defaults where a field is unset."""
    static = {
        str(e["name"]): str(e["value"])
        for e in container.get("env") or ()
        if isinstance(e, Mapping) and "name" in e and "value" in e
    }
    out = []
    for field, kind in PROBES:
        spec = container.get(field)
        if not isinstance(spec, Mapping):
            continue
        action = next((a for a in ("exec", "httpGet", "tcpSocket", "grpc") if isinstance(spec.get(a), Mapping)), None)
        if action is None:
            continue
        handler: Mapping = spec[action]
        port = handler.get("port", 0)
        number = {k: to_int(spec.get(k), 0) for k in _PROBE_NUMBERS}  # 0 and unset alike: the API server's defaults
        grace = spec.get("terminationGracePeriodSeconds")
        out.append(
            model.Probe(
                kind=kind,
                action=action,
                command=tuple(expand(str(a), static.get) for a in handler.get("command") or ()),
                port=port if isinstance(port, int) else str(port),
                host=str(handler["host"]) if handler.get("host") else None,
                path=str(handler.get("path") or "/"),
                scheme=str(handler.get("scheme") or "HTTP").upper(),
                headers=tuple(
                    (str(h.get("name", "")), str(h.get("value", "")))
                    for h in handler.get("httpHeaders") or ()
                    if isinstance(h, Mapping)
                ),
                initial_delay=max(number["initialDelaySeconds"], 0),
                period=max(number["periodSeconds"], 0) or 10,
                timeout=max(number["timeoutSeconds"], 0) or 1,
                success_threshold=max(number["successThreshold"], 0) or 1,
                failure_threshold=max(number["failureThreshold"], 0) or 3,
                grace_period=None if grace is None else max(to_int(grace, 0), 0),
            )
        )
    return tuple(out)
