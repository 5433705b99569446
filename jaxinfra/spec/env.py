"""A job's extra env values: a literal, or a reference to a key of a Secret or ConfigMap.

Credentials never go inline into manifests: `credential_literal` says why a literal looks like one,
so the job's validator can reject it and point at a Secret instead.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from jaxinfra.spec.base import TAG, Spec, kind_of, subdomain, tagged


class _KeyRef(Spec):
    """An env value read from a key of an object in the job's namespace (never an inline literal)."""

    _positional = ("name", "key")
    _what: ClassVar[str]
    name: str = Field(description="The object's name (in the job's namespace).")
    key: str = Field(min_length=1, description="Key in the object's data.")
    optional: bool = Field(False, description="Start the pod even if the object or key is missing.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return subdomain(v, cls._what)


class SecretRef(_KeyRef):
    """A key of a Secret: `SecretRef("wandb", "api-key")`."""

    _what = "Secret"
    kind: Literal["secret"] = Field("secret", description=TAG)


class ConfigMapRef(_KeyRef):
    """A key of a ConfigMap: `ConfigMapRef("settings", "mode")`."""

    _what = "ConfigMap"
    kind: Literal["configmap"] = Field("configmap", description=TAG)


EnvValue = tagged(
    {"literal": str, "secret": SecretRef, "configmap": ConfigMapRef},
    "an env value",
    "use a string, SecretRef(name, key) or ConfigMapRef(name, key)",
    tag=lambda value: "literal" if isinstance(value, str) else kind_of(value),
)

#: Parts of an env var name (split at '_', '.', '-') that say its value is a credential.
_CREDENTIAL_WORDS = frozenset(
    {"PASSWORD", "PASSWD", "SECRET", "TOKEN", "APIKEY", "CREDENTIAL", "CREDENTIALS", "PASSPHRASE"}
)
_CREDENTIAL_PAIRS = ("API_KEY", "ACCESS_KEY", "PRIVATE_KEY", "SECRET_KEY", "AUTH_KEY")
#: Well-known credential formats (value, whatever the name).
_CREDENTIAL_FORMATS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an AWS access key id", re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a PEM private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a GitHub token", re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("an OpenAI-style secret key", re.compile(r"\bsk-[A-Za-z0-9_-]{32,}")),
)
_REF_ONLY = re.compile(r"^(\$\([A-Za-z_][A-Za-z0-9_.-]*\))+$")
_TOKENISH = re.compile(r"^[A-Za-z0-9+/=_-]{32,}$")


def _entropy(text: str) -> float:
    import math
    from collections import Counter

    return -sum(n / len(text) * math.log2(n / len(text)) for n in Counter(text).values())


def credential_literal(name: str, value: str) -> str | None:
    """Why a literal env value looks like a credential, or None.

    By name: a part PASSWORD, SECRET, TOKEN, APIKEY, CREDENTIAL(S)... or API_KEY, ACCESS_KEY,
    PRIVATE_KEY... (TOKENIZERS_PARALLELISM or MAX_TOKENS are not). By value: a well-known key
    format, or a long (>= 32) random-looking string (upper, lower and digits, >= 4.5 bits of
    entropy per character: hex digests and paths stay below). Empty values and values made
    only of `$(VAR)` references are not literals.
    """
    if not value or _REF_ONLY.match(value):
        return None
    upper = name.upper()
    if set(re.split(r"[_.-]", upper)) & _CREDENTIAL_WORDS or any(pair in upper for pair in _CREDENTIAL_PAIRS):
        return f"{name} names a credential and its value is a literal"
    for what, pattern in _CREDENTIAL_FORMATS:
        if pattern.search(value):
            return f"the value of {name} looks like {what}"
    if (
        _TOKENISH.match(value)
        and _entropy(value) >= 4.5
        and all(re.search(c, value) for c in ("[a-z]", "[A-Z]", "[0-9]"))
    ):
        return f"the value of {name} looks like a random secret (long, high-entropy)"
    return None
