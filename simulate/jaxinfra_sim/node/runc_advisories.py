"""runc's known vulnerabilities: the ones its sandbox must not have, from runc's GitHub security advisories, each with
the first release of every release line that fixed it, read against a runc's version (`advisories`), less the CVEs
its distribution backported without changing the upstream version (`parts` reads them from the package's changelog).
A vulnerable runc is a warning in `jaxinfra doctor` and a note in every `--run-command` report, never a refusal: the
sandbox around it is what the boundary hardens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Advisory:
    """Vulnerabilities of runc fixed together: their CVE ids, what they let a container do, and the first release of
    each release line that has the fix (a line below all of them has none)."""

    cves: tuple[str, ...]
    what: str
    fixed: tuple[str, ...]


RUNC_ADVISORIES = (
    # opencontainers/runc GHSA-xr7r-f8xq-vfvv (2024-01-31): runc 1.1.12.
    Advisory(("CVE-2024-21626",), "a container's working directory in the machine's files (a leaked fd)", ("1.1.12",)),
    # opencontainers/runc GHSA-9493-h29p-rfm2, GHSA-qw9x-cqr3-wc7r, GHSA-cgrx-mc8f-2prm (2025-11-05): runc 1.2.8, 1.3.3
    # and 1.4.0-rc.3.
    Advisory(
        ("CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"),
        "masked paths and /dev/console mounts raced into writes of the machine's /proc (core_pattern)",
        ("1.2.8", "1.3.3", "1.4.0"),
    ),
)


def release(text: str) -> tuple[int, int, int, bool] | None:
    """(major, minor, patch, final) of a version as runc prints it ("1.1.5+ds1", "1.4.0-rc.2"); None if unreadable."""
    found = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?(-rc[.\d]*)?", text.strip())
    if found is None:
        return None
    major, minor, patch, rc = found.groups()
    return int(major), int(minor), int(patch or 0), rc is None


def vulnerable(version: str, advisory: Advisory) -> bool:
    """Whether upstream runc `version` predates `advisory`'s fix in its release line (a pre-release of the fixed
    release counts as before it)."""
    have = release(version)
    if have is None:
        return False
    for fixed in sorted(filter(None, map(release, advisory.fixed))):
        if have[:2] == fixed[:2]:
            return have < fixed
        if have[:2] < fixed[:2]:
            return True
    return False


def advisories(version: str, backported: Iterable[str] = ()) -> list[str]:
    """A line for each of `RUNC_ADVISORIES` that `version` has, less the CVEs its distribution fixed (`backported`)."""
    fixed = set(backported)
    out = []
    for a in RUNC_ADVISORIES:
        open_ = [c for c in a.cves if c not in fixed]
        if open_ and vulnerable(version, a):
            out.append(
                f"runc {version} has {', '.join(open_)} ({a.what}; fixed in runc {', '.join(a.fixed)}): upgrade "
                "runc past it, or run --run-command only on inputs you trust"
            )
    return out
