"""The base of every spec object (`Spec`: recorded now, validated by the root) and the validators they share.

Kept apart from the objects so that each kind of object (accelerators, env, checkpoints, jobs) builds on
one place for Kubernetes names, quantities and tagged unions.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Union

from pydantic import BaseModel, ConfigDict, Discriminator, PrivateAttr, Tag

from jaxinfra.spec.problems import problem

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
LABEL_KEY_FIX = "use [prefix/]name with a DNS prefix and a name of at most 63 alphanumerics, '-', '_', '.'"
#: The description of every union member's `kind` field: the tag that picks the class when the spec is raw data.
TAG = "Which member of its union this is; fixed by the class, written only in raw dicts and JSON."
LABEL_VALUE_FIX = "use at most 63 alphanumerics, '-', '_', '.', starting and ending alphanumeric"


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a Kubernetes label (or annotation) key, [prefix/]name, or None."""
    prefix, _, name = key.rpartition("/")
    bad_prefix = bool(prefix) and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix))
    if len(name) > 63 or not _LABEL_NAME.match(name) or bad_prefix:
        return f"{key!r} is not a valid key"
    return None


def label_value_ok(value: str) -> bool:
    """A label value: at most 63 alphanumerics, '-', '_', '.', starting and ending alphanumeric, or empty."""
    return len(value) <= 63 and (not value or bool(_LABEL_NAME.match(value)))


def dns_label(value: str, max_len: int = 63) -> str:
    """Kubernetes names that become DNS labels: lower-case alphanumerics and '-'."""
    if len(value) > max_len or not _DNS_LABEL.match(value):
        raise problem(
            f"not a DNS-1123 label of at most {max_len} characters",
            "use lower-case letters, digits and '-', starting and ending alphanumeric",
        )
    return value


class Spec(BaseModel):
    """Base of every spec object: frozen, no unknown fields, validated by the root.

    Calling a spec class records its input (`__init__`); the root `Cluster` validates the
    whole tree later. Pydantic builds validated objects with `__new__` alone, never through
    `__init__`, as long as `__pydantic_custom_init__` is false (BaseModel's documented class
    attribute, which `__pydantic_init_subclass__` resets because this `__init__` only serves the
    user's call), so validated objects are ordinary models. `defer_build`: only the root's
    validator is compiled (with these inlined), which keeps the CLI's start-up short.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    _positional: ClassVar[tuple[str, ...]] = ()
    _input: dict[str, Any] | None = PrivateAttr(default=None)

    def __init__(self, /, *args: Any, **data: Any) -> None:
        positional = type(self)._positional
        if len(args) > len(positional):
            raise TypeError(f"{type(self).__name__}() takes at most {len(positional)} positional arguments")
        data.update(zip(positional, args))
        shell = type(self).model_construct(**data)  # fields as given, defaults filled in, nothing checked
        shell._input = data
        self.__setstate__(shell.__getstate__())

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.__pydantic_custom_init__ = False


def raw(value: Any) -> Any:
    """The unvalidated input tree: what the user passed, for one validation pass at the root."""
    if isinstance(value, Spec):
        if value._input is None:  # already validated (reused from another cluster)
            data = {k: getattr(value, k) for k in value.model_fields_set}
        else:
            data = dict(value._input)
        if "kind" in type(value).model_fields:
            data.setdefault("kind", type(value).model_fields["kind"].default)
        return {k: raw(v) for k, v in data.items()}
    if isinstance(value, (list, tuple)):
        return [raw(v) for v in value]
    if isinstance(value, dict):
        return {k: raw(v) for k, v in value.items()}
    return value


def subdomain(v: str, what: str) -> str:
    """Object names that are DNS-1123 subdomains (a Secret, a claim, a StorageClass); `what` names the kind."""
    if len(v) > 253 or not DNS_SUBDOMAIN.match(v):
        raise problem(f"not a valid {what} name", "use a DNS-1123 subdomain: lower-case letters, digits, '-' and '.'")
    return v


def kind_of(value: Any) -> str | None:
    """A tagged union member's tag: its `kind`, as an object or as the user's dict."""
    return value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)


def tagged(members: dict[str, Any], what: str, fix: str, tag: Any = kind_of) -> Any:
    """A union of `members` (tag -> type) told apart by `tag(value)`; any other value is one problem, `not <what>`.

    Optional members are a tag of their own (`None`: "none"): `X | None` of such a union cannot be built, since its
    error context is a dict, which typing cannot hash.
    """
    return Annotated[
        Union[tuple(Annotated[t, Tag(k)] for k, t in members.items())],  # noqa: UP007 (built at run time)
        Discriminator(
            tag,
            custom_error_type="jaxinfra",
            custom_error_message=f"not {what}",
            custom_error_context={"fix": fix, "field": ""},
        ),
    ]
