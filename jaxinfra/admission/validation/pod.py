"""PodSpec, PodTemplateSpec and Pod, as the API server's validation step checks them: restart and DNS policies,
names the spec refers to, tolerations; the containers are `containers.py`'s, the volumes `volumes.py`'s, the
securityContext's sysctls and shareProcessNamespace `sysctls.py`'s.

Emulated from pkg/apis/core/validation/validation.go @000f26050b9b (kubernetes/kubernetes; the commit is the stored
version read): ValidatePodSpec, ValidatePodTemplateSpec, validateRestartPolicy, validateDNSPolicy,
validatePodDNSConfig (dnsPolicy None), ValidateTolerations; the Pod warnings from pkg/api/pod/warnings.go (a negative
terminationGracePeriodSeconds is accepted, with a warning, and treated as 1) and pkg/registry/core/pod/strategy.go
@008b3652959c (WarningsOnCreate: a Pod name that is no DNS label).

Knowingly not emulated: affinity, topologySpreadConstraints, hugepage divisibility.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jaxinfra.admission.decoded import as_int, as_list, as_map, as_str, entries
from jaxinfra.admission.store import Finding, Path
from jaxinfra.admission.validation.containers import containers
from jaxinfra.admission.validation.messages import (
    distinct,
    forbidden,
    invalid_each,
    invalid_value,
    not_supported,
    required_value,
)
from jaxinfra.admission.validation.meta import NAME_FIX, name_errors, validate_annotations, validate_labels
from jaxinfra.admission.validation.names import (
    LABEL,
    SUBDOMAIN,
    dns1123_label,
    dns1123_subdomain,
    label_value,
    qualified_name,
)
from jaxinfra.admission.validation.sysctls import validate_pod_security_context
from jaxinfra.admission.validation.volumes import (
    validate_volumes,
)


def _tolerations(tolerations: Any, at: Path) -> list[Finding]:
    """ValidateTolerations."""
    out: list[Finding] = []
    for i, t in entries(tolerations):
        where = at + (i,)
        key, op, effect = as_str(t.get("key")), as_str(t.get("operator")), as_str(t.get("effect"))
        if key:
            out += invalid_each(where + ("key",), key, qualified_name(key), "use the taint's key")
        if not key and op != "Exists":
            out.append(
                invalid_value(
                    where + ("operator",),
                    op,
                    'operator must be Exists when `key` is empty, which means "match all values and all keys"',
                    "set the key, or use operator: Exists",
                )
            )
        if t.get("tolerationSeconds") is not None and effect != "NoExecute":
            out.append(
                invalid_value(
                    where + ("effect",),
                    effect,
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                    "use effect: NoExecute or drop tolerationSeconds",
                )
            )
        value = as_str(t.get("value"))
        if op in ("Equal", ""):
            if errs := label_value(value):
                out.append(invalid_value(where + ("operator",), value, ";".join(errs), "use the taint's value"))
        elif op == "Exists":
            if value:
                out.append(
                    invalid_value(
                        where + ("operator",),
                        value,
                        "value must be empty when `operator` is 'Exists'",
                        "drop the value",
                    )
                )
        else:
            out.append(not_supported(where + ("operator",), op, ("Equal", "Exists"), "use Equal or Exists"))
        if effect and effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            out.append(
                not_supported(
                    where + ("effect",),
                    effect,
                    ("NoSchedule", "PreferNoSchedule", "NoExecute"),
                    "use NoSchedule, PreferNoSchedule or NoExecute",
                )
            )
    return out


_RESTART = ("Always", "OnFailure", "Never")
_DNS = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")


def pod_spec(spec: Mapping, at: Path) -> list[Finding]:
    """ValidatePodSpec: volumes, containers, restartPolicy (default Always), dnsPolicy (default ClusterFirst),
    nodeSelector, names it refers to, activeDeadlineSeconds, hostname/subdomain, tolerations, the securityContext's
    sysctls and shareProcessNamespace (`sysctls`); a negative terminationGracePeriodSeconds is a warning (the API
    server treats it as 1)."""
    spec = as_map(spec)
    volumes, out = validate_volumes(spec.get("volumes"), at + ("volumes",))
    out += containers(spec, volumes, at)
    restart = spec.get("restartPolicy", "Always")
    if isinstance(restart, str) and restart not in _RESTART:
        out.append(
            required_value(at + ("restartPolicy",), "use Always, OnFailure or Never")
            if not restart
            else not_supported(at + ("restartPolicy",), restart, _RESTART, "use Always, OnFailure or Never")
        )
    dns = spec.get("dnsPolicy", "ClusterFirst")
    if isinstance(dns, str) and dns not in _DNS:
        out.append(
            required_value(at + ("dnsPolicy",), "use ClusterFirst")
            if not dns
            else not_supported(at + ("dnsPolicy",), dns, _DNS, "use ClusterFirst (the default)")
        )
    out += validate_labels(spec.get("nodeSelector"), at + ("nodeSelector",))
    if dns == "None":
        config = spec.get("dnsConfig")
        if not isinstance(config, Mapping):
            out.append(
                required_value(
                    at + ("dnsConfig",),
                    "give dnsConfig.nameservers, or use dnsPolicy: ClusterFirst",
                    "must provide `dnsConfig` when `dnsPolicy` is None",
                )
            )
        elif not as_list(config.get("nameservers")):
            out.append(
                required_value(
                    at + ("dnsConfig", "nameservers"),
                    "list at least one nameserver",
                    "must provide at least one DNS nameserver when `dnsPolicy` is None",
                )
            )
    for key, rule in (("serviceAccountName", SUBDOMAIN), ("nodeName", SUBDOMAIN)):
        value = as_str(spec.get(key))
        if value:
            out += invalid_each(at + (key,), value, name_errors(rule, value), NAME_FIX[rule])
    deadline = as_int(spec.get("activeDeadlineSeconds"))
    if deadline is not None and not 1 <= deadline <= 2**31 - 1:
        out.append(
            invalid_value(
                at + ("activeDeadlineSeconds",),
                deadline,
                "must be between 1 and 2147483647, inclusive",
                "use a positive number of seconds",
            )
        )
    for key in ("hostname", "subdomain"):
        value = as_str(spec.get(key))
        if value:
            out += invalid_each(at + (key,), value, dns1123_label(value), NAME_FIX[LABEL])
    out += _tolerations(spec.get("tolerations"), at + ("tolerations",))
    out += validate_pod_security_context(spec, at)
    priority = as_str(spec.get("priorityClassName"))
    if priority:
        out += invalid_each(at + ("priorityClassName",), priority, dns1123_subdomain(priority), NAME_FIX[SUBDOMAIN])
    grace = as_int(spec.get("terminationGracePeriodSeconds"))
    if grace is not None and grace < 0:
        out.append(
            Finding(
                at + ("terminationGracePeriodSeconds",),
                grace,
                "must be >= 0; negative values are invalid and will be treated as 1",
                "use 0 or more seconds",
                warning=True,
            )
        )
    return out


def pod_template(template: Mapping, at: Path) -> list[Finding]:
    """ValidatePodTemplateSpec: the template's labels and annotations (upstream names them `<at>.labels`), its pod
    spec, and no ephemeral containers."""
    template = as_map(template)
    meta = as_map(template.get("metadata"))
    out = validate_labels(meta.get("labels"), at + ("labels",))
    out += validate_annotations(meta.get("annotations"), at + ("annotations",))
    spec = as_map(template.get("spec"))
    out += pod_spec(spec, at + ("spec",))
    if as_list(spec.get("ephemeralContainers")):
        out.append(
            forbidden(
                at + ("spec", "ephemeralContainers"),
                "ephemeral containers not allowed in pod template",
                "drop ephemeralContainers: they are added to running pods only",
            )
        )
    return distinct(out)


def validate_pod(obj: Mapping) -> list[Finding]:
    """ValidatePodCreate: the spec, images without surrounding blanks, and the name warning of WarningsOnCreate."""
    spec = as_map(obj.get("spec"))
    out = pod_spec(spec, ("spec",))
    for part in ("containers", "initContainers"):
        for i, c in entries(spec.get(part)):
            image = as_str(c.get("image"))
            if image != image.strip():
                out.append(
                    invalid_value(
                        ("spec", part, i, "image"),
                        image,
                        "must not have leading or trailing whitespace",
                        "trim the image reference",
                    )
                )
    name = as_str(as_map(obj.get("metadata")).get("name"))
    if name and (errs := dns1123_label(name)) and not dns1123_subdomain(name):
        out.append(
            Finding(
                ("metadata", "name"),
                name,
                "this is used in the Pod's hostname, which can result in "
                f"surprising behavior; a DNS label is recommended: [{' '.join(errs)}]",
                "use a DNS label: no dots, at most 63 characters",
                warning=True,
            )
        )
    return out
