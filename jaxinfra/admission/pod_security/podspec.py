"""What Pod Security's checks share (upstream's policy/helpers.go, policy/visitor.go and policy/registry.go types,
kubernetes/pod-security-admission commit 8f84a87c7f617f64a4ddc1aea24aeeb7a2e07cb8): Go's text helpers, a pod spec read
the way Go decodes it (absent, null and a wrong type all read as unset), containers visited in upstream's order, and
the shape of a check and its revisions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from jaxinfra.admission.decoded import as_map, as_str
from jaxinfra.admission.pod_security.levels import Version

# --- Go's text helpers ---------------------------------------------------------------------------------------------


def join_quote(items: Iterable[str]) -> str:
    items = list(items)
    return '"' + '", "'.join(items) + '"' if items else ""


def pluralize(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def named(singular: str, plural: str, names: list[str]) -> str:
    """`container "a"` / `containers "a", "b"`."""
    return f"{pluralize(singular, plural, len(names))} {join_quote(names)}"


# --- reading a pod spec the way Go decodes it (absent, null and a wrong type all read as unset) -------------------


def is_set(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """A pointer-to-struct field is set: present as an object (JSON null decodes to nil)."""
    return isinstance(value, Mapping)


def items_of(value: Any) -> list[Any]:
    """A list field's items; anything else (absent, null, mistyped) reads as no items."""
    return value if isinstance(value, list) else []


def strings_of(value: Any) -> list[str]:
    return [v for v in items_of(value) if isinstance(v, str)]


def containers_of(spec: Mapping) -> list[Mapping]:
    """visitContainers: init containers, containers, then ephemeral containers."""
    return [
        c
        for key in ("initContainers", "containers", "ephemeralContainers")
        for c in items_of(spec.get(key))
        if isinstance(c, Mapping)
    ]


def container_name(container: Mapping) -> str:
    return as_str(container.get("name"))


def security_context(obj: Mapping) -> Mapping | None:
    """A pod's or container's securityContext, None when unset."""
    sc = obj.get("securityContext")
    return sc if isinstance(sc, Mapping) else None


def is_windows(spec: Mapping) -> bool:
    return as_map(spec.get("os")).get("name") == "windows"


def in_user_namespace(spec: Mapping) -> bool:
    """relaxPolicyForUserNamespacePod: hostUsers explicitly false."""
    return spec.get("hostUsers") is False


def setters_of(pod_bad: bool, containers: list[str]) -> list[str]:
    """The "pod" and/or `container(s) "..."` that set a forbidden value."""
    return (["pod"] if pod_bad else []) + ([named("container", "containers", containers)] if containers else [])


Result = tuple[str, str] | None
"""A failed check's (reason, detail), or None when the pod passes it."""
CheckFn = Callable[[Mapping, Mapping], Result]


def not_windows(check: CheckFn) -> CheckFn:
    """The 1.25 revision of a restricted check: a pod with spec.os.name=windows passes it."""
    return lambda pod_meta, spec: None if is_windows(spec) else check(pod_meta, spec)


def not_user_namespace(check: CheckFn) -> CheckFn:
    """The 1.35 revision of a restricted check: a pod with hostUsers: false passes it."""
    return lambda pod_meta, spec: None if in_user_namespace(spec) else check(pod_meta, spec)


@dataclass(frozen=True)
class Revision:
    """One revision of a check: from which policy version it applies, and the baseline checks it replaces."""

    since: Version
    check: CheckFn
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class Check:
    """One upstream check: its ID, level, revisions (oldest first), and how to satisfy it (our words)."""

    id: str
    level: str
    revisions: tuple[Revision, ...]
    fix: str
