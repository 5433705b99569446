"""runc's known vulnerabilities: the ones its sandbox must not have, from runc's GitHub security advisories, each with
the first release of every release line that fixed it, read against a runc's version (`advisories`), less the CVEs
its distribution backported without changing the upstream version (`parts` reads them from the package's changelog).
A vulnerable runc is a warning in `jaxinfra doctor` and a note in every `--run-command` report: the sandbox around it
is what the boundary hardens. What the sandbox cannot harden is what a hole makes runc trust in the container's own
tree while it sets the container up (`Advisory.trusted`): a pod that puts a volume at or over one of those paths,
where another container sharing the volume could swap it, is refused on a runc that has the hole (`trusted`,
`runc.refusal`), as this machine's limit (exit 3), with runc's version and the release that fixes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from jaxinfra_sim.runtime import rootfs, runc


@dataclass(frozen=True)
class Advisory:
    """Vulnerabilities of runc fixed together: their CVE ids, what they let a container do, the first release of each
    release line that has the fix (a line below all of them has none), and the container paths a runc that has them
    takes as it finds them while it sets a container up (`trusted`: no volume may be at or over one), with `why`."""

    cves: tuple[str, ...]
    what: str
    fixed: tuple[str, ...]
    trusted: tuple[str, ...] = ()  # container paths runc takes as it finds them while it sets the container up
    why: str = ""  # what it does with them, and what its fix checks


RUNC_ADVISORIES = (
    # opencontainers/runc GHSA-xr7r-f8xq-vfvv (2024-01-31): runc 1.1.12.
    Advisory(("CVE-2024-21626",), "a container's working directory in the machine's files (a leaked fd)", ("1.1.12",)),
    # opencontainers/runc GHSA-9493-h29p-rfm2, GHSA-qw9x-cqr3-wc7r, GHSA-cgrx-mc8f-2prm (2025-11-05): runc 1.2.8, 1.3.3
    # and 1.4.0-rc.3.
    # What each trusts (runc @ f19387a6 = v1.1.5 libcontainer/rootfs_linux.go): `maskPath` binds the container's own
    # /dev/null over every masked path, and a masked path that is not there (ENOENT) or not a folder (ENOTDIR) is
    # taken as it resolves; with a terminal, /dev/pts/N is bound at /dev/console. The fix (runc @ eeb7e602 = v1.2.8:
    # 11cf22d1 "add/use isDevNull, verifyDevNull", 7ea4eb02, faa67dff maskPaths, 0c3e7c1b and 6763c0b7 console) opens
    # /dev/null once, checks it is the 1:3 character device and mounts from that descriptor.
    Advisory(
        ("CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"),
        "masked paths and /dev/console mounts raced into writes of the machine's /proc (core_pattern)",
        ("1.2.8", "1.3.3", "1.4.0"),
        ("/dev/null", "/dev/console", "/dev/pts", *(f"/{p}" for p in rootfs.MASKED)),
        "takes the container's own /dev/null, /dev/pts and masked paths as it finds them while it masks /proc (a "
        "container sharing that volume can swap them for symlinks to the machine's /proc/sys/kernel/core_pattern); "
        "its fix checks them first",
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


def _open(version: str, backported: Iterable[str]) -> list[tuple[Advisory, list[str]]]:
    """Each of `RUNC_ADVISORIES` that `version` has, with its CVEs less those its distribution fixed (`backported`)."""
    fixed = set(backported)
    found = [(a, [c for c in a.cves if c not in fixed]) for a in RUNC_ADVISORIES]
    return [(a, cves) for a, cves in found if cves and vulnerable(version, a)]


def advisories(version: str, backported: Iterable[str] = ()) -> list[str]:
    """A line for each of `RUNC_ADVISORIES` that `version` has, less the CVEs its distribution fixed (`backported`)."""
    return [
        f"runc {version} has {', '.join(cves)} ({a.what}; fixed in runc {', '.join(a.fixed)}): upgrade runc past it, "
        "or run --run-command only on inputs you trust"
        for a, cves in _open(version, backported)
    ]


def trusted(version: str, backported: Iterable[str] = ()) -> tuple[runc.Trusted, ...]:
    """What the runc of `version` (as `parts` reads it) takes as it finds it in a container's tree, for each hole it
    has (less what its distribution fixed)."""
    return tuple(
        runc.Trusted(version, tuple(cves), a.fixed, a.trusted, a.why)
        for a, cves in _open(version, backported)
        if a.trusted
    )
