"""The API server's validation step: what `pkg/apis/*/validation` refuses in an object after defaulting, beyond
what the JSON schema already checked (types), with the API server's messages. `validate` is the entry point.

Each rule is emulated from the upstream source (kubernetes/kubernetes); each module cites the files and commits of
the rules it holds:

- `names` -- apimachinery util/validation's string rules (DNS labels and subdomains, qualified names, label
  values, config keys, environment variable names, port names, local paths).
- `messages` -- the field-error message grammar (field/errors.go) and the findings it builds.
- `meta` -- ObjectMeta (objectmeta.go, generic.go) and label selectors.
- `volumes` -- a PodSpec's volumes and volume mounts (and the downward API selectors env shares).
- `pod` -- PodSpec (containers, ports, env, resources, tolerations), PodTemplateSpec and Pod.
- `sysctls` -- a PodSpec's sysctls and shareProcessNamespace, and the kernel namespace of each sysctl (the
  simulator's kubelet reads it too).
- `job` -- batch/v1 Job.
- `core` -- Service, ConfigMap, Secret, Namespace.
- `networking` -- NetworkPolicy.
- here -- `validate`: ObjectMeta for every kind, then the kind's own rules; ServiceAccount (ValidateServiceAccount)
  has none beyond ObjectMeta.

The rules the simulator also applies at run time (volume item paths, subPaths, ConfigMap/Secret keys, volume
names) live in `names` once; `simulate/volumes.py` imports them from here. Go reports map entries in random order;
this package keeps the object's order.
"""

from __future__ import annotations

from collections.abc import Mapping

from jaxinfra.admission.decoded import as_map, as_str
from jaxinfra.admission.store import CLUSTER_SCOPED, Finding
from jaxinfra.admission.validation.core import MAX_SECRET_BYTES as MAX_SECRET_BYTES
from jaxinfra.admission.validation.core import (
    validate_config_map,
    validate_namespace,
    validate_priority_class,
    validate_secret,
    validate_service,
)
from jaxinfra.admission.validation.disruption import validate_pod_disruption_budget
from jaxinfra.admission.validation.job import (
    COMPLETIONS_SOFT_LIMIT as COMPLETIONS_SOFT_LIMIT,
)
from jaxinfra.admission.validation.job import (
    HIGH_COMPLETIONS_LIMIT as HIGH_COMPLETIONS_LIMIT,
)
from jaxinfra.admission.validation.job import (
    MAX_FAILED_INDEXES as MAX_FAILED_INDEXES,
)
from jaxinfra.admission.validation.job import (
    MAX_INDEXED_PARALLELISM as MAX_INDEXED_PARALLELISM,
)
from jaxinfra.admission.validation.job import validate_job
from jaxinfra.admission.validation.limit_range import validate_limit_range
from jaxinfra.admission.validation.messages import distinct

# the other public limits, importable here as before the split (outside `__all__`, as they were)
from jaxinfra.admission.validation.meta import TOTAL_ANNOTATION_BYTES as TOTAL_ANNOTATION_BYTES
from jaxinfra.admission.validation.meta import object_meta
from jaxinfra.admission.validation.names import (
    DNS1035,
    LABEL,
    RELAXED_ENV_VAR_NAMES,
    SUBDOMAIN,
    config_map_key,
    dns1035_label,
    dns1123_label,
    dns1123_subdomain,
    env_var_name,
    label_value,
    local_descending_path,
    local_non_reserved_path,
    qualified_name,
)
from jaxinfra.admission.validation.networking import validate_network_policy
from jaxinfra.admission.validation.pod import pod_spec, pod_template, validate_pod
from jaxinfra.admission.validation.resource_quota import validate_resource_quota
from jaxinfra.upstream import BATCH_API, NETWORKING_API

__all__ = [
    "validate",
    "object_meta",
    "pod_spec",
    "pod_template",
    "SUBDOMAIN",
    "LABEL",
    "DNS1035",
    "dns1123_label",
    "dns1123_subdomain",
    "dns1035_label",
    "qualified_name",
    "label_value",
    "config_map_key",
    "env_var_name",
    "local_descending_path",
    "local_non_reserved_path",
    "RELAXED_ENV_VAR_NAMES",
]


_BUILTIN = {  # (apiVersion, kind) -> (the name rule, the kind's own rules)
    (BATCH_API, "Job"): (SUBDOMAIN, validate_job),
    ("v1", "Pod"): (SUBDOMAIN, validate_pod),
    ("v1", "Service"): (DNS1035, validate_service),
    ("v1", "ConfigMap"): (SUBDOMAIN, validate_config_map),
    ("v1", "Secret"): (SUBDOMAIN, validate_secret),
    ("v1", "Namespace"): (LABEL, validate_namespace),
    ("v1", "ServiceAccount"): (SUBDOMAIN, None),
    ("scheduling.k8s.io/v1", "PriorityClass"): (SUBDOMAIN, validate_priority_class),
    ("v1", "LimitRange"): (SUBDOMAIN, validate_limit_range),
    ("v1", "ResourceQuota"): (SUBDOMAIN, validate_resource_quota),
    ("policy/v1", "PodDisruptionBudget"): (SUBDOMAIN, validate_pod_disruption_budget),
    (NETWORKING_API, "NetworkPolicy"): (SUBDOMAIN, validate_network_policy),
}


def validate(obj: Mapping) -> list[Finding]:
    """Every finding of the validation step for one object: ObjectMeta for every kind (a kind without its own
    rules here, a custom one included, has DNS-1123 subdomain names), then the kind's own rules."""
    if not isinstance(obj, Mapping):
        return []
    api_version, kind = as_str(obj.get("apiVersion")), as_str(obj.get("kind"))
    rule, rules = _BUILTIN.get((api_version, kind), (SUBDOMAIN, None))
    group = api_version.rpartition("/")[0]
    builtin = "." not in group or (group.endswith(".k8s.io") and not group.endswith(".x-k8s.io"))
    out = object_meta(as_map(obj.get("metadata")), rule, namespaced=kind not in CLUSTER_SCOPED, kube=builtin)
    return distinct(out + (rules(obj) if rules else []))
