"""Kubernetes RBAC as the simulated API server decides it (simulate/rbac.py): a table of the
semantics the upstream authorizer has, and properties over generated policies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxinfra_sim.apiserver.rbac import Attributes, Policy, Subject, authorize

pytestmark = pytest.mark.unit

RBAC = "rbac.authorization.k8s.io/v1"
SA = Subject("team", "trainer")


def role(name: str, *rules: dict, ns: str = "team") -> dict:
    return {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": name, "namespace": ns}, "rules": list(rules)}


def cluster_role(name: str, *rules: dict, labels: dict | None = None, aggregate: dict | None = None) -> dict:
    obj = {
        "apiVersion": RBAC,
        "kind": "ClusterRole",
        "metadata": {"name": name, **({"labels": labels} if labels else {})},
        "rules": list(rules),
    }
    if aggregate:
        obj["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": aggregate}]}
    return obj


def rule(verbs: list, resources: list, groups: list | None = None, names: list | None = None) -> dict:
    return {
        "apiGroups": [""] if groups is None else groups,
        "resources": resources,
        "verbs": verbs,
        **({"resourceNames": names} if names else {}),
    }


def binding(name: str, ref_kind: str, ref: str, *subjects: dict, ns: str | None = "team") -> dict:
    kind = "RoleBinding" if ns else "ClusterRoleBinding"
    return {
        "apiVersion": RBAC,
        "kind": kind,
        "metadata": {"name": name, **({"namespace": ns} if ns else {})},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": ref_kind, "name": ref},
        "subjects": list(subjects),
    }


def sa(name: str = "trainer", ns: str | None = "team") -> dict:
    return {"kind": "ServiceAccount", "name": name, **({"namespace": ns} if ns else {})}


READ_PODS = role("read-pods", rule(["get", "list", "watch"], ["pods"]))
BOUND = binding("read-pods", "Role", "read-pods", sa())

# (case, objects, request, allowed)
TABLE = [
    ("role verb grants", [READ_PODS, BOUND], Attributes("list", "", "pods", "team"), True),
    ("verb not listed", [READ_PODS, BOUND], Attributes("delete", "", "pods", "team", "p"), False),
    (
        "verb *",
        [role("r", rule(["*"], ["pods"])), binding("b", "Role", "r", sa())],
        Attributes("delete", "", "pods", "team", "p"),
        True,
    ),
    ("other API group", [READ_PODS, BOUND], Attributes("list", "batch", "pods", "team"), False),
    (
        "API group *",
        [role("r", rule(["list"], ["jobs"], ["*"])), binding("b", "Role", "r", sa())],
        Attributes("list", "batch", "jobs", "team"),
        True,
    ),
    (
        "resource does not cover its subresource",
        [READ_PODS, BOUND],
        Attributes("get", "", "pods/log", "team", "p"),
        False,
    ),
    (
        "subresource named",
        [role("r", rule(["get"], ["pods/log"])), binding("b", "Role", "r", sa())],
        Attributes("get", "", "pods/log", "team", "p"),
        True,
    ),
    (
        "resource * covers subresources",
        [role("r", rule(["get"], ["*"])), binding("b", "Role", "r", sa())],
        Attributes("get", "", "pods/log", "team", "p"),
        True,
    ),
    (
        "*/log covers any resource's log",
        [role("r", rule(["get"], ["*/log"])), binding("b", "Role", "r", sa())],
        Attributes("get", "", "pods/log", "team", "p"),
        True,
    ),
    (
        "*/log is not the resource",
        [role("r", rule(["get"], ["*/log"])), binding("b", "Role", "r", sa())],
        Attributes("get", "", "pods", "team", "p"),
        False,
    ),
    (
        "resourceNames: that name",
        [role("r", rule(["get", "list"], ["pods"], names=["p0"])), binding("b", "Role", "r", sa())],
        Attributes("get", "", "pods", "team", "p0"),
        True,
    ),
    (
        "resourceNames: another name",
        [role("r", rule(["get", "list"], ["pods"], names=["p0"])), binding("b", "Role", "r", sa())],
        Attributes("get", "", "pods", "team", "p1"),
        False,
    ),
    (
        "resourceNames: a list names nothing",
        [role("r", rule(["get", "list"], ["pods"], names=["p0"])), binding("b", "Role", "r", sa())],
        Attributes("list", "", "pods", "team"),
        False,
    ),
    ("RoleBinding is its namespace only", [READ_PODS, BOUND], Attributes("list", "", "pods", "other"), False),
    ("RoleBinding does not reach the cluster scope", [READ_PODS, BOUND], Attributes("list", "", "pods", ""), False),
    (
        "RoleBinding to a ClusterRole: binding's namespace",
        [cluster_role("c", rule(["list"], ["pods"])), binding("b", "ClusterRole", "c", sa())],
        Attributes("list", "", "pods", "team"),
        True,
    ),
    (
        "RoleBinding to a ClusterRole: not elsewhere",
        [cluster_role("c", rule(["list"], ["pods"])), binding("b", "ClusterRole", "c", sa())],
        Attributes("list", "", "pods", "other"),
        False,
    ),
    (
        "ClusterRoleBinding: every namespace",
        [cluster_role("c", rule(["list"], ["pods"])), binding("b", "ClusterRole", "c", sa(), ns=None)],
        Attributes("list", "", "pods", "other"),
        True,
    ),
    (
        "ClusterRoleBinding: cluster scope",
        [cluster_role("c", rule(["list"], ["pods"])), binding("b", "ClusterRole", "c", sa(), ns=None)],
        Attributes("list", "", "pods", ""),
        True,
    ),
    (
        "Role is looked up in the binding's namespace",
        [role("r", rule(["list"], ["pods"]), ns="other"), binding("b", "Role", "r", sa())],
        Attributes("list", "", "pods", "team"),
        False,
    ),
    (
        "SA subject without namespace: the binding's",
        [READ_PODS, binding("b", "Role", "read-pods", sa(ns=None))],
        Attributes("list", "", "pods", "team"),
        True,
    ),
    (
        "SA subject without namespace: nobody in a ClusterRoleBinding",
        [cluster_role("c", rule(["list"], ["pods"])), binding("b", "ClusterRole", "c", sa(ns=None), ns=None)],
        Attributes("list", "", "pods", "team"),
        False,
    ),
    (
        "SA of another namespace",
        [READ_PODS, binding("b", "Role", "read-pods", sa(ns="other"))],
        Attributes("list", "", "pods", "team"),
        False,
    ),
    (
        "another SA",
        [READ_PODS, binding("b", "Role", "read-pods", sa("someone"))],
        Attributes("list", "", "pods", "team"),
        False,
    ),
    (
        "Group of the namespace's service accounts",
        [READ_PODS, binding("b", "Role", "read-pods", {"kind": "Group", "name": "system:serviceaccounts:team"})],
        Attributes("list", "", "pods", "team"),
        True,
    ),
    (
        "Group of all service accounts",
        [READ_PODS, binding("b", "Role", "read-pods", {"kind": "Group", "name": "system:serviceaccounts"})],
        Attributes("list", "", "pods", "team"),
        True,
    ),
    (
        "Group system:authenticated",
        [READ_PODS, binding("b", "Role", "read-pods", {"kind": "Group", "name": "system:authenticated"})],
        Attributes("list", "", "pods", "team"),
        True,
    ),
    (
        "Group of another namespace",
        [READ_PODS, binding("b", "Role", "read-pods", {"kind": "Group", "name": "system:serviceaccounts:other"})],
        Attributes("list", "", "pods", "team"),
        False,
    ),
    (
        "User named as the SA's user",
        [READ_PODS, binding("b", "Role", "read-pods", {"kind": "User", "name": "system:serviceaccount:team:trainer"})],
        Attributes("list", "", "pods", "team"),
        True,
    ),
    (
        "User of another name",
        [READ_PODS, binding("b", "Role", "read-pods", {"kind": "User", "name": "trainer"})],
        Attributes("list", "", "pods", "team"),
        False,
    ),
    (
        "default view ClusterRole reads pods",
        [binding("b", "ClusterRole", "view", sa())],
        Attributes("list", "", "pods", "team"),
        True,
    ),
    (
        "default view ClusterRole reads jobs",
        [binding("b", "ClusterRole", "view", sa())],
        Attributes("get", "batch", "jobs", "team", "j"),
        True,
    ),
    (
        "default view ClusterRole: no secrets",
        [binding("b", "ClusterRole", "view", sa())],
        Attributes("list", "", "secrets", "team"),
        False,
    ),
    (
        "default edit includes view",
        [binding("b", "ClusterRole", "edit", sa())],
        Attributes("watch", "", "services", "team"),
        True,
    ),
    (
        "aggregation: an input role labelled aggregate-to-view",
        [
            cluster_role(
                "jobset-view",
                rule(["list"], ["jobsets"], ["jobset.x-k8s.io"]),
                labels={"rbac.authorization.k8s.io/aggregate-to-view": "true"},
            ),
            binding("b", "ClusterRole", "view", sa()),
        ],
        Attributes("list", "jobset.x-k8s.io", "jobsets", "team"),
        True,
    ),
    (
        "aggregation reaches admin through edit",
        [
            cluster_role(
                "jobset-view",
                rule(["list"], ["jobsets"], ["jobset.x-k8s.io"]),
                labels={"rbac.authorization.k8s.io/aggregate-to-view": "true"},
            ),
            binding("b", "ClusterRole", "admin", sa()),
        ],
        Attributes("list", "jobset.x-k8s.io", "jobsets", "team"),
        True,
    ),
    (
        "an input ClusterRole replaces the default of its name",
        [cluster_role("view"), binding("b", "ClusterRole", "view", sa())],
        Attributes("list", "", "pods", "team"),
        False,
    ),
    ("no binding: discovery is open to the authenticated", [], Attributes("get", path="/apis/batch/v1"), True),
    ("no binding: /version", [], Attributes("get", path="/version"), True),
    ("no binding: other paths are not", [], Attributes("get", path="/metrics"), False),
    ("no binding: no resource", [], Attributes("list", "", "pods", "team"), False),
    (
        "no binding: self access review",
        [],
        Attributes("create", "authorization.k8s.io", "selfsubjectaccessreviews"),
        True,
    ),
    (
        "nonResourceURLs prefix",
        [
            cluster_role("logs", {"nonResourceURLs": ["/logs/*"], "verbs": ["get"]}),
            binding("b", "ClusterRole", "logs", sa(), ns=None),
        ],
        Attributes("get", path="/logs/kubelet.log"),
        True,
    ),
    (
        "cluster-admin",
        [binding("b", "ClusterRole", "cluster-admin", sa(), ns=None)],
        Attributes("delete", "apps", "deployments", "x", "d"),
        True,
    ),
]


@pytest.mark.parametrize(("objects", "attrs", "allowed"), [c[1:] for c in TABLE], ids=[c[0] for c in TABLE])
def test_rbac_semantics(objects: list[dict], attrs: Attributes, allowed: bool) -> None:
    assert Policy(objects).decide(SA, attrs).allowed is allowed


def test_authorize_is_the_resource_request_form() -> None:
    assert authorize(SA, "list", "", "pods", "team", None, [READ_PODS, BOUND])
    assert not authorize(SA, "list", "", "pods", None, None, [READ_PODS, BOUND])
    assert SA.username == "system:serviceaccount:team:trainer"
    assert SA.groups == ("system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated")


def test_reasons_name_the_binding_or_the_missing_role() -> None:
    allowed = Policy([READ_PODS, BOUND]).decide(SA, Attributes("list", "", "pods", "team"))
    assert (
        allowed.reason
        == 'RBAC: allowed by RoleBinding "read-pods/team" of Role "read-pods" to ServiceAccount "trainer/team"'
    )
    missing = Policy([binding("b", "Role", "gone", sa()), binding("c", "ClusterRole", "gone-too", sa())]).decide(
        SA, Attributes("list", "", "pods", "team")
    )
    assert missing == type(missing)(
        False,
        'RBAC: [role.rbac.authorization.k8s.io "gone" not found, '
        'clusterrole.rbac.authorization.k8s.io "gone-too" not found]',
    )
    assert Policy([]).decide(SA, Attributes("list", "", "pods", "team")).reason == ""


def test_served_policy_holds_the_aggregated_rules() -> None:
    served = {o["metadata"]["name"]: o for o in Policy([]).objects() if o["kind"] == "ClusterRole"}
    view_rules = served["view"]["rules"]
    assert {
        "apiGroups": ["batch"],
        "resources": ["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
        "verbs": ["get", "list", "watch"],
    } in view_rules
    assert all(r in served["edit"]["rules"] for r in view_rules)
    assert all(r in served["admin"]["rules"] for r in served["edit"]["rules"])


# ---- properties over generated policies ------------------------------------------------------

NAMESPACES = ("a", "b", "c")
names = st.sampled_from(("r0", "r1"))
rules = st.builds(
    rule,
    st.lists(st.sampled_from(("get", "list", "watch", "delete", "*")), min_size=1, max_size=2),
    st.lists(st.sampled_from(("pods", "jobs", "secrets", "pods/log", "*", "*/log")), min_size=1, max_size=2),
    st.lists(st.sampled_from(("", "batch", "*")), min_size=1, max_size=2),
    st.one_of(st.none(), st.lists(st.sampled_from(("p0", "p1")), min_size=1, max_size=1)),
)
subjects = st.one_of(
    st.builds(sa, st.sampled_from(("x", "y")), st.one_of(st.none(), st.sampled_from(NAMESPACES))),
    st.builds(
        lambda n: {"kind": "Group", "name": n},
        st.sampled_from(
            ("system:serviceaccounts", "system:authenticated", *(f"system:serviceaccounts:{n}" for n in NAMESPACES))
        ),
    ),
    st.builds(
        lambda ns, n: {"kind": "User", "name": f"system:serviceaccount:{ns}:{n}"},
        st.sampled_from(NAMESPACES),
        st.sampled_from(("x", "y")),
    ),
)
policy_objects = st.lists(
    st.one_of(
        st.builds(
            lambda n, ns, rs: role(n, *rs, ns=ns), names, st.sampled_from(NAMESPACES), st.lists(rules, max_size=2)
        ),
        st.builds(lambda n, rs: cluster_role(n, *rs), names, st.lists(rules, max_size=2)),
        st.builds(
            lambda n, k, ref, ns, subs: binding(n, k, ref, *subs, ns=ns),
            names,
            st.sampled_from(("Role", "ClusterRole")),
            names,
            st.one_of(st.none(), st.sampled_from(NAMESPACES)),
            st.lists(subjects, min_size=1, max_size=2),
        ),
    ),
    max_size=8,
)
requests = st.builds(
    lambda v, g, r, ns, n: Attributes(v, g, r, ns, n),
    st.sampled_from(("get", "list", "watch", "delete")),
    st.sampled_from(("", "batch")),
    st.sampled_from(("pods", "jobs", "secrets", "pods/log")),
    st.sampled_from(NAMESPACES),
    st.sampled_from(("", "p0", "p1")),
)
tokens = st.builds(Subject, st.sampled_from(NAMESPACES), st.sampled_from(("x", "y")))


def _outside(obj: dict, namespace: str) -> bool:
    return obj["kind"] in ("Role", "RoleBinding") and obj["metadata"]["namespace"] != namespace


def _names_subject(entry: dict, who: Subject, binding_ns: str) -> bool:
    if entry["kind"] == "ServiceAccount":
        return (entry.get("namespace") or binding_ns, entry["name"]) == (who.namespace, who.name) and bool(
            entry.get("namespace") or binding_ns
        )
    return entry["name"] in (who.username, *who.groups)


def _grants_everywhere_but(namespace: str, who: Subject) -> st.SearchStrategy[list[dict]]:
    """What a token's owner could put in the other namespaces: everything granted to it there."""
    others = [n for n in NAMESPACES if n != namespace]
    own = st.sampled_from(
        [
            sa(who.name, who.namespace),
            sa(who.name, None),
            {"kind": "User", "name": who.username},
            *({"kind": "Group", "name": g} for g in who.groups),
        ]
    )
    grant = st.builds(
        lambda ns, ref, subject: [
            role("all", rule(["*"], ["*"], ["*"]), ns=ns),
            binding(f"grant-{ref}", *ref.split(":"), subject, ns=ns),
        ],
        st.sampled_from(others),
        st.sampled_from(("Role:all", "ClusterRole:cluster-admin", "ClusterRole:edit")),
        own,
    )
    return st.lists(grant, min_size=1, max_size=3).map(lambda groups: [o for g in groups for o in g])


@settings(max_examples=300, deadline=None)
@given(policy_objects, tokens, requests, st.data())
def test_no_namespace_is_read_without_a_binding_there(
    objects: list[dict], who: Subject, attrs: Attributes, data: st.DataObject
) -> None:
    """Roles and RoleBindings of other namespaces (a token's own included, granting it everything
    there) never change a decision in a namespace; an allowed request always has a
    ClusterRoleBinding or a RoleBinding in the request's namespace naming the token's
    ServiceAccount, its user or one of its groups."""
    inside = [o for o in objects if not _outside(o, attrs.namespace)]
    decision = Policy(objects).decide(who, attrs).allowed
    assert Policy(inside).decide(who, attrs).allowed == decision
    foreign = data.draw(_grants_everywhere_but(attrs.namespace, who))
    assert Policy([*inside, *foreign]).decide(who, attrs).allowed == decision
    if decision:
        assert any(
            o["kind"] in ("RoleBinding", "ClusterRoleBinding")
            and any(_names_subject(s, who, o["metadata"].get("namespace", "")) for s in o["subjects"])
            for o in inside
        )


@settings(max_examples=200, deadline=None)
@given(policy_objects, rules, tokens, requests)
def test_adding_a_rule_never_denies(objects: list[dict], extra: dict, who: Subject, attrs: Attributes) -> None:
    """RBAC is purely additive: granting more never takes a permission away."""
    before = Policy(objects).decide(who, attrs).allowed
    grown = [dict(o, rules=[*o["rules"], extra]) if o["kind"] in ("Role", "ClusterRole") else o for o in objects]
    assert Policy(grown).decide(who, attrs).allowed >= before
