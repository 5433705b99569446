"""Kubernetes RBAC: whether a ServiceAccount may make a request, as the API server's RBAC
authorizer decides it. Pure functions over the Roles, ClusterRoles and their bindings among the
inputs, plus the default policy every cluster has (rbac_defaults.yaml); no I/O but reading that
package file once.

Semantics from kubernetes/kubernetes:
- plugin/pkg/auth/authorizer/rbac/rbac.go (`RuleAllows`: verb, API group, resource incl.
  subresource, resourceName; non-resource URLs for paths such as /version) and
  pkg/apis/rbac/v1/evaluation_helpers.go (`*` wildcards, `*/sub` subresource rules, `/prefix*` URLs);
- pkg/registry/rbac/validation/rule.go (`VisitRulesFor`: every ClusterRoleBinding, then the
  RoleBindings of the request's namespace only; a RoleBinding's ClusterRole applies in the
  binding's namespace; a ServiceAccount subject without a namespace means the binding's own, and
  matches nothing in a ClusterRoleBinding; a missing role is an error that the 403 reports);
- pkg/controller/clusterroleaggregation (an `aggregationRule` ClusterRole holds the rules of every
  ClusterRole its selectors match);
- staging/src/k8s.io/apiserver/pkg/authentication/serviceaccount/util.go (a token's user name and
  groups; `system:authenticated` is added to every authenticated user).
Not emulated: the Node authorizer, webhook authorizers (GKE's IAM), impersonation, and the
`fieldSelector`/`labelSelector` request attributes of newer releases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from jaxinfra import yamlio
from jaxinfra.upstream import RBAC_API_GROUP
from jaxinfra_sim.apiserver.selectors import label_selector, matches
from jaxinfra_sim.core.inputs import meta, namespace_of

__all__ = ["Subject", "Attributes", "Decision", "Policy", "authorize", "default_policy"]

RBAC_KINDS = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})


@dataclass(frozen=True)
class Subject:
    """Who a bearer token is: a ServiceAccount."""

    namespace: str
    name: str

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    @property
    def groups(self) -> tuple[str, ...]:
        return ("system:serviceaccounts", f"system:serviceaccounts:{self.namespace}", "system:authenticated")


@dataclass(frozen=True)
class Attributes:
    """What a request asks (authorizer.Attributes): a resource request, or a non-resource `path`."""

    verb: str
    api_group: str = ""
    resource: str = ""  # with its subresource, if any: "pods/log"
    namespace: str = ""  # "" at the cluster scope
    name: str = ""
    path: str = ""  # a non-resource request ("/version") when set

    def allowed_by(self, rule: Mapping) -> bool:
        """rbac.go `RuleAllows`."""
        verbs = rule.get("verbs") or ()
        if "*" not in verbs and self.verb not in verbs:
            return False
        if self.path:
            return any(
                url == "*" or url == self.path or (url.endswith("*") and self.path.startswith(url.rstrip("*")))
                for url in rule.get("nonResourceURLs") or ()
            )
        groups, names = rule.get("apiGroups") or (), rule.get("resourceNames") or ()
        sub = self.resource.partition("/")[2]
        return (
            ("*" in groups or self.api_group in groups)
            and any(
                r == "*" or r == self.resource or (bool(sub) and r == "*/" + sub) for r in rule.get("resources") or ()
            )
            and (not names or self.name in names)
        )


@dataclass(frozen=True)
class Decision:
    """The authorizer's answer and its reason: the binding that allowed, or, on a denial, the
    role references that failed to resolve ("" when none did), as the 403 message carries them."""

    allowed: bool
    reason: str = ""


@lru_cache(maxsize=1)
def default_policy() -> tuple[Mapping, ...]:
    """The RBAC objects every cluster has (package data, loaded on first use)."""
    [objects] = yamlio.load(resources.files(__package__).joinpath("rbac_defaults.yaml").read_text(encoding="utf-8"))
    return tuple(objects)


def _key(obj: Mapping) -> tuple[str, str, str]:
    namespaced = obj.get("kind") in ("Role", "RoleBinding")
    return obj.get("kind", ""), namespace_of(obj) if namespaced else "", meta(obj).get("name", "")


def _describe(kind: str, subject: Mapping, namespace: str) -> str:
    if kind == "ServiceAccount":
        return f'ServiceAccount "{subject.get("name")}/{subject.get("namespace") or namespace}"'
    return f'{kind} "{subject.get("name")}"'


class Policy:
    """The cluster's RBAC objects, indexed: the inputs' over the defaults (same kind and name: the
    input wins), each aggregated ClusterRole holding its aggregated rules."""

    def __init__(self, objects: Sequence[Mapping]):
        index: dict[tuple[str, str, str], Mapping] = {}
        for obj in (*default_policy(), *objects):
            if obj.get("kind") in RBAC_KINDS and str(obj.get("apiVersion", "")).startswith(RBAC_API_GROUP + "/"):
                index[_key(obj)] = obj
        self._index = index
        self._cluster_roles = {k[2]: v for k, v in index.items() if k[0] == "ClusterRole"}
        self._rules = {name: self._aggregate(name, ()) for name in self._cluster_roles}
        self.cluster_role_bindings = sorted((v for k, v in index.items() if k[0] == "ClusterRoleBinding"), key=_key)
        self.role_bindings = sorted((v for k, v in index.items() if k[0] == "RoleBinding"), key=_key)

    def _aggregate(self, name: str, seen: tuple[str, ...]) -> tuple[Mapping, ...]:
        role = self._cluster_roles[name]
        rule_ = role.get("aggregationRule")
        if not rule_:
            return tuple(role.get("rules") or ())
        selectors = [label_selector(s) for s in rule_.get("clusterRoleSelectors") or ()]
        rules: list[Mapping] = []
        for other in sorted(self._cluster_roles):
            labels = meta(self._cluster_roles[other]).get("labels") or {}
            if other != name and other not in seen and any(matches(s, labels) for s in selectors):
                rules += [r for r in self._aggregate(other, (*seen, name)) if r not in rules]
        return tuple(rules)

    def objects(self) -> list[dict]:
        """The RBAC objects as the cluster serves them: aggregated ClusterRoles with their rules."""
        return [
            dict(obj, rules=list(self._rules[k[2]]))
            if k[0] == "ClusterRole" and obj.get("aggregationRule")
            else dict(obj)
            for k, obj in sorted(self._index.items())
        ]

    def _role_rules(self, ref: Mapping, namespace: str) -> tuple[Mapping, ...] | str:
        """A binding's role's rules, or the lister's error when it cannot be resolved."""
        kind, name = ref.get("kind"), ref.get("name", "")
        if kind == "Role":
            role = self._index.get(("Role", namespace, name))
            return tuple(role.get("rules") or ()) if role else f'role.{RBAC_API_GROUP} "{name}" not found'
        if kind == "ClusterRole":
            return self._rules[name] if name in self._rules else f'clusterrole.{RBAC_API_GROUP} "{name}" not found'
        return f'unsupported role reference kind: "{kind}"'

    @staticmethod
    def _applies(subject: Subject, entry: Mapping, namespace: str) -> bool:
        kind, name = entry.get("kind"), entry.get("name")
        if kind == "User":
            return name == subject.username
        if kind == "Group":
            return name in subject.groups
        if kind == "ServiceAccount":
            return bool(entry.get("namespace") or namespace) and (entry.get("namespace") or namespace, name) == (
                subject.namespace,
                subject.name,
            )
        return False

    def decide(self, subject: Subject, attrs: Attributes) -> Decision:
        errors: list[str] = []
        scopes = [("ClusterRoleBinding", b, "") for b in self.cluster_role_bindings]
        if attrs.namespace:
            scopes += [
                ("RoleBinding", b, attrs.namespace) for b in self.role_bindings if namespace_of(b) == attrs.namespace
            ]
        for kind, binding, namespace in scopes:
            entry = next((s for s in binding.get("subjects") or () if self._applies(subject, s, namespace)), None)
            if entry is None:
                continue
            ref = binding.get("roleRef") or {}
            rules = self._role_rules(ref, namespace)
            if isinstance(rules, str):
                errors.append(rules)
            elif any(attrs.allowed_by(r) for r in rules):
                where = f"{meta(binding).get('name')}/{namespace}" if namespace else meta(binding).get("name")
                return Decision(
                    True,
                    f'RBAC: allowed by {kind} "{where}" of {ref.get("kind")} "{ref.get("name")}" '
                    f"to {_describe(str(entry.get('kind')), entry, namespace)}",
                )
        unique = list(dict.fromkeys(errors))
        return Decision(
            False, "" if not unique else "RBAC: " + (unique[0] if len(unique) == 1 else f"[{', '.join(unique)}]")
        )


def authorize(
    subject: Subject,
    verb: str,
    api_group: str,
    resource: str,
    namespace: str | None,
    name: str | None,
    objects: Sequence[Mapping],
) -> bool:
    """Whether RBAC over `objects` (plus the default policy) lets `subject` make this resource request."""
    return Policy(objects).decide(subject, Attributes(verb, api_group, resource, namespace or "", name or "")).allowed
