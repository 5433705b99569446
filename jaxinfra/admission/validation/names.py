"""apimachinery's string rules, as the API server's validation step applies them: DNS-1123 labels and subdomains,
DNS-1035 labels, qualified names, label values, config keys, environment variable names, port names, local paths.

Emulated from the upstream source (kubernetes/kubernetes; the commit is the stored version read):

- names, keys and values -- staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go @008b3652959c
  (IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label, IsConfigMapKey, IsEnvVarName, IsRelaxedEnvVarName,
  IsValidPortNum, IsValidPortName, IsDomainPrefixedPath, RegexError, hasChDirPrefix) and
  staging/src/k8s.io/apimachinery/pkg/api/validate/content/kube.go @26c0309663d6 (IsLabelKey, which is
  IsQualifiedName, and IsLabelValue). Lengths are Go's `len`: bytes. Newer content/errors.go @248642091bda says
  "must be no more than N bytes"; this module keeps util/validation's "characters", which the DNS rules print.
- the relaxed environment variable names -- pkg/features/kube_features.go: RelaxedEnvironmentVariableValidation
  is GA and locked on since 1.34, so every printable ASCII character but '=' is allowed (`RELAXED_ENV_VAR_NAMES`).
  RelaxedServiceNameValidation is alpha (off): a Service name stays a DNS-1035 label.
- local paths -- pkg/apis/core/validation/validation.go @000f26050b9b (validateLocalDescendingPath,
  ValidateLocalNonReservedPath).

The rules the simulator also applies at run time (volume item paths, subPaths, ConfigMap/Secret keys, volume
names) live here once; `simulate/volumes.py` imports them (from `jaxinfra.admission.validation`).
"""

from __future__ import annotations

import re

SUBDOMAIN, LABEL, DNS1035 = "subdomain", "label", "dns1035"
"""The `name_rule` values of `object_meta`: NameIsDNSSubdomain, NameIsDNSLabel, NameIsDNS1035Label (another value
is taken as a subdomain, the rule of most kinds and of every custom resource)."""

RELAXED_ENV_VAR_NAMES = True
"""RelaxedEnvironmentVariableValidation: GA and locked on since Kubernetes 1.34."""

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + r"(\." + _LABEL_FMT + ")*"
_DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_VALUE_FMT = "(" + _KEY_FMT + ")?"
_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_ENV_FMT = "[-._a-zA-Z][-._a-zA-Z0-9]*"
HTTP_PATH_FMT = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery RegexError, spacing included (each example is followed by ', ', then ' or ')."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    return msg + " (e.g. " + " or ".join(f"'{e}', " for e in examples) + f"regex used for validation is '{fmt}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def byte_size(value: str) -> int:
    return len(value.encode())


def dns1123_label(value: str) -> list[str]:
    """IsDNS1123Label: at most 63 bytes of [a-z0-9-], alphanumeric at both ends ("must not contain dots" for a
    subdomain)."""
    errs = [_max_len(63)] if byte_size(value) > 63 else []
    if not re.fullmatch(_LABEL_FMT, value):
        errs.append(
            "must not contain dots"
            if re.fullmatch(_SUBDOMAIN_FMT, value)
            else regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
                "and end with an alphanumeric character",
                _LABEL_FMT,
                "my-name",
                "123-abc",
            )
        )
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    """IsDNS1123Subdomain: at most 253 bytes of dot-separated DNS-1123 labels."""
    errs = [_max_len(253)] if byte_size(value) > 253 else []
    if not re.fullmatch(_SUBDOMAIN_FMT, value):
        errs.append(
            regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                "must start and end with an alphanumeric character",
                _SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return errs


def dns1035_label(value: str) -> list[str]:
    """IsDNS1035Label: a DNS-1123 label that starts with a letter (Service names)."""
    errs = [_max_len(63)] if byte_size(value) > 63 else []
    if not re.fullmatch(_DNS1035_FMT, value):
        errs.append(
            regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
                "character, and end with an alphanumeric character",
                _DNS1035_FMT,
                "my-name",
                "abc-123",
            )
        )
    return errs


def qualified_name(value: str) -> list[str]:
    """IsQualifiedName (content.IsLabelKey): an optional DNS subdomain prefix and '/', then a name of at most 63
    bytes; label keys, annotation keys (lowercased), finalizers, resource names."""
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) > 2:
        return [
            "a valid label key "
            + regex_error(_KEY_MSG, _KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if len(parts) == 2:
        if not parts[0]:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in dns1123_subdomain(parts[0]))
    name = parts[-1]
    if not name:
        errs.append("name part must be non-empty")
    elif byte_size(name) > 63:
        errs.append("name part " + _max_len(63))
    if not re.fullmatch(_KEY_FMT, name):
        errs.append("name part " + regex_error(_KEY_MSG, _KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def label_value(value: str) -> list[str]:
    """IsValidLabelValue: empty, or at most 63 bytes of [A-Za-z0-9-_.], alphanumeric at both ends."""
    errs = [_max_len(63)] if byte_size(value) > 63 else []
    if not re.fullmatch(_VALUE_FMT, value):
        errs.append(
            regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character",
                _VALUE_FMT,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errs


def _chdir_prefix(value: str) -> list[str]:
    if value in (".", ".."):
        return [f"must not be '{value}'"]
    return ["must not start with '..'"] if value.startswith("..") else []


def config_map_key(value: str) -> list[str]:
    """IsConfigMapKey: a ConfigMap's or Secret's key (and so a projected file's name)."""
    errs = [_max_len(253)] if byte_size(value) > 253 else []
    if not re.fullmatch(_CONFIG_KEY_FMT, value):
        errs.append(
            regex_error(
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                _CONFIG_KEY_FMT,
                "key.name",
                "KEY_NAME",
                "key-name",
            )
        )
    return errs + _chdir_prefix(value)


def env_var_name(value: str, relaxed: bool = RELAXED_ENV_VAR_NAMES) -> list[str]:
    """IsRelaxedEnvVarName (the gate on: printable ASCII but '='), or IsEnvVarName (a C-like name with '-' '.')."""
    if relaxed:
        errs = ["environment variable name must be non-empty"] if not value else []
        if any(not " " <= c <= "~" or c == "=" for c in value):
            errs.append(
                "a valid environment variable name must consist only of printable ASCII characters other than '='"
            )
        return errs
    errs = (
        []
        if re.fullmatch(_ENV_FMT, value)
        else [
            regex_error(
                "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or "
                "'.', and must not start with a digit",
                _ENV_FMT,
                "my.env-name",
                "MY_ENV.NAME",
                "MyEnvName1",
            )
        ]
    )
    return errs + _chdir_prefix(value)


def port_name(value: str) -> list[str]:
    """IsValidPortName: an IANA service name."""
    errs = [_max_len(15)] if byte_size(value) > 15 else []
    if not re.fullmatch("[-a-z0-9]+", value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", value):
        errs.append("must contain at least one letter (a-z)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


PORT_RANGE = "must be between 1 and 65535, inclusive"


def local_descending_path(value: str) -> list[str]:
    """validateLocalDescendingPath: relative, with no '..' element (subPath, subPathExpr, gitRepo directory)."""
    errs = ["must be a relative path"] if value.startswith("/") else []
    return errs + (["must not contain '..'"] if ".." in value.split("/") else [])


def local_non_reserved_path(value: str) -> list[str]:
    """ValidateLocalNonReservedPath: a descending path that does not start with '..' (the kubelet's ..data)."""
    reserved = value.startswith("..") and not value.startswith("../")
    return local_descending_path(value) + (["must not start with '..'"] if reserved else [])
