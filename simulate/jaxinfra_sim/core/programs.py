"""Where this machine's programs are, as the simulator's parts look them up: on PATH, else in the sbin folders a
user's PATH often lacks (runc, ip and nft are installed there). The runtime, the image unpacker and the pods' network
find their programs here; which package brings each one, and checking them all before a run starts, is the node's
(`node.parts`, `jaxinfra doctor`)."""

from __future__ import annotations

import os
import shutil

from jaxinfra_sim.core.errors import Unavailable

SBIN = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")
"""Where a program is looked for beyond PATH."""


def find(name: str) -> str | None:
    """Where program `name` is: on PATH, else in one of the `SBIN` folders; None where it is not installed."""
    return shutil.which(name) or next((p for p in (f"{d}/{name}" for d in SBIN) if os.access(p, os.X_OK)), None)


def required(name: str) -> str:
    """Where program `name` is; `Unavailable` (exit status 3) where it is not installed. A run checks every part it
    uses before it starts (`node.parts.require`, which names the packages): this is for a caller that did not."""
    if (path := find(name)) is None:
        raise Unavailable(f"`{name}` is not installed", "`jaxinfra doctor --install` installs every part it needs")
    return path
