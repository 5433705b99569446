"""Whether JAX's Kubernetes detection (`k8s_detection`, K8sCluster) can work in a pod of the inputs: its conditions
(`k8s_unmet`), with where the token's automount was turned off, and RBAC: K8sCluster lists the pods of its namespace
and gets the pod's Job as its ServiceAccount, which the inputs' Roles and bindings must allow (`rbac`).
"""

from __future__ import annotations

from functools import cached_property

from jaxinfra_sim.apiserver.rbac import RBAC_KINDS, Attributes, Policy, Subject
from jaxinfra_sim.core import model
from jaxinfra_sim.core.inputs import Objects
from jaxinfra_sim.jax.k8s_detection import Unmet, k8s_job, k8s_unmet


class K8sAccess:
    """K8sCluster's access from the pods of `objects` (`k8s_client`: the pods' Python can import `kubernetes`)."""

    def __init__(self, objects: Objects, k8s_client: bool = True) -> None:
        self.objects = objects
        self.k8s_client = k8s_client
        self._rbac: dict[tuple[str, str, str], Unmet | None] = {}

    def unmet(self, pod: model.Pod) -> Unmet | None:
        """`k8s_unmet`, with where the token's automount was turned off, and RBAC: K8sCluster lists the pods of the
        namespace and gets the pod's Job as its ServiceAccount."""
        unmet = k8s_unmet(pod, k8s_client=self.k8s_client)
        if unmet is not None and not pod.token:
            account = self.objects.service_accounts.get((pod.namespace, pod.service_account)) or {}
            where = (
                f"ServiceAccount '{pod.service_account}' sets automountServiceAccountToken: false and the pod template "
                "does not set it true"
                if account.get("automountServiceAccountToken") is False
                else "the pod template sets automountServiceAccountToken: false"
            )
            return Unmet(unmet.condition.replace("(automountServiceAccountToken: false)", f"({where})"), unmet.fix)
        if unmet is not None:
            return unmet
        key = (pod.namespace, pod.service_account, k8s_job(pod) or "")
        if key not in self._rbac:
            self._rbac[key] = self._rbac_unmet(*key)
        return self._rbac[key]

    @cached_property
    def _policy(self) -> Policy:
        """The inputs' RBAC objects over the default policy, as the API server authorizes requests."""
        return Policy([o for kind in sorted(RBAC_KINDS) for o in self.objects.store.of_kind(kind)])

    def _rbac_unmet(self, namespace: str, account: str, job: str) -> Unmet | None:
        policy = self._policy
        for verb, group, resource, name in (("list", "", "pods", ""), ("get", "batch", "jobs", job)):
            if not policy.decide(
                Subject(namespace, account), Attributes(verb, group, resource, namespace, name)
            ).allowed:
                return Unmet(
                    f"ServiceAccount '{account}' may not {verb} {resource} in namespace '{namespace}', as K8sCluster "
                    "does to find its pod and Job (the API server answers 403 Forbidden)",
                    f"bind ServiceAccount '{account}' to a Role that allows list on pods and get on jobs "
                    "(apiGroups: [batch])",
                )
        return None
