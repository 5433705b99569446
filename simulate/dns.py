"""Cluster DNS for simulated pods: a private /etc/hosts holding exactly the names the manifests make resolvable.

The simulator moves itself (and so every pod it forks) into its own mount namespace and
bind-mounts a hosts file over /etc/hosts there; glibc, c-ares (gRPC, inside JAX) and Python
all read it. The machine's own /etc/hosts is untouched. Names the manifests would not make
resolvable are simply absent, so they fail to resolve, as on a cluster.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


class DnsUnavailable(RuntimeError):
    """This machine lets the simulator create no mount namespace (and so no private DNS)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise DnsUnavailable(f"{what}: {os.strerror(err)}")


class PrivateHosts:
    """A hosts file bind-mounted over /etc/hosts in this process's own mount namespace."""

    def __init__(self, folder: Path):
        self.path = folder / "hosts"
        self._base = Path("/etc/hosts").read_text(encoding="utf-8") if Path("/etc/hosts").exists() else ""
        self.write({})
        libc = _libc()
        uid, gid = os.getuid(), os.getgid()
        if uid == 0:
            _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        else:  # an unprivileged user gets a user namespace in which it may mount
            _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(CLONE_NEWUSER|CLONE_NEWNS)")
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
            Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
        _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        _check(libc.mount(str(self.path).encode(), b"/etc/hosts", None, MS_BIND, None), "bind-mount /etc/hosts")

    def write(self, hosts: Mapping[str, str]) -> None:
        """Replace the simulated records (in place: the bind mount follows the inode)."""
        lines = [self._base.rstrip("\n"), "# jaxinfra simulate: cluster DNS"]
        lines += [f"{ip} {name}" for name, ip in sorted(hosts.items())]
        with open(self.path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
