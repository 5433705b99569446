"""Admission: what the API server decides about a workload's pods before any of them exists.

- The ServiceAccount admission plugin (kubernetes plugin/pkg/admission/serviceaccount/admission.go):
  a pod naming a ServiceAccount that does not exist in its namespace is refused at creation
  ("error looking up service account <ns>/<name>: serviceaccount \"<name>\" not found"), so its
  controller creates no pod; `default` exists in every namespace (the ServiceAccount controller
  makes it). The plugin also mounts the ServiceAccount token volume at
  /var/run/secrets/kubernetes.io/serviceaccount unless `automountServiceAccountToken` is false
  on the pod (which wins) or on the ServiceAccount; default true.
"""

from __future__ import annotations

from collections.abc import Mapping

from jaxinfra.errors import Problem

from .inputs import Objects

DEFAULT_SERVICE_ACCOUNT = "default"


def service_account(pod_spec: Mapping) -> str:
    """spec.serviceAccountName (or its deprecated alias serviceAccount), defaulted."""
    return pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT


def mounts_token(pod_spec: Mapping, namespace: str, objects: Objects) -> bool:
    """Whether the pod gets the ServiceAccount token volume: the pod's setting wins, then the ServiceAccount's."""
    if pod_spec.get("automountServiceAccountToken") is not None:
        return bool(pod_spec["automountServiceAccountToken"])
    sa = objects.service_accounts.get((namespace, service_account(pod_spec))) or {}
    return sa.get("automountServiceAccountToken") is not False


def service_account_problem(where: str, pod_spec: Mapping, namespace: str, objects: Objects) -> Problem | None:
    """The API server's refusal of a pod whose ServiceAccount does not exist."""
    name = service_account(pod_spec)
    if name == DEFAULT_SERVICE_ACCOUNT or (namespace, name) in objects.service_accounts:
        return None
    others = sorted(n for (ns, n) in objects.service_accounts if ns == namespace)
    return Problem(f"{where} serviceAccountName", name,
                   f"the API server refuses to create the pods: error looking up service account {namespace}/{name}: "
                   f"serviceaccount \"{name}\" not found" + (f" (ServiceAccounts in {namespace}: {', '.join(others)})" if others else ""),
                   f"add a ServiceAccount '{name}' in namespace '{namespace}' to the manifests, or use one that exists")
