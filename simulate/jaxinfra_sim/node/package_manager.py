"""The distribution's package manager, as `jaxinfra doctor --install` drives it: the commands that install packages
on each family of distributions (`commands`: apt-get on Debian and Ubuntu, dnf on Fedora; through sudo unless root),
as shown to a person or run quietly, and running them (`run`). Which packages: `parts`."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence

from jaxinfra_sim.core.errors import Unavailable

MANAGERS: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "debian": (("apt-get", "update"), ("apt-get", "install", "-y")),
    "fedora": (("dnf", "install", "-y"),),
}
"""Each family's package manager: the commands that install packages (the last one is given them)."""
QUIET: Mapping[str, tuple[str, ...]] = {
    "apt-get": ("-qq",),
    "dnf": ("-q",),
}
Runner = Callable[[list[str]], "subprocess.CompletedProcess[bytes]"]
"""Runs one command to its end (`subprocess.run`, its output captured; the tests' stand-in)."""


def commands(family: str | None, root: bool, packages: Sequence[str], quiet: bool = False) -> list[list[str]]:
    """The commands that install `packages` with `family`'s package manager (through sudo unless `root`); [] where
    none are wanted or the family is none known here. `quiet`: as `run` runs them (no output, no question asked)."""
    steps = MANAGERS.get(family or "", ())
    if not packages or not steps:
        return []
    sudo = [] if root else ["sudo", *(["-n"] if quiet and not sys.stdin.isatty() else [])]
    out: list[list[str]] = []
    for tool, *args in steps:
        argv = [tool, *(QUIET[tool] if quiet else ()), *args]
        if quiet and tool == "apt-get":  # (sudo keeps no environment of the caller's)
            argv = ["env", "DEBIAN_FRONTEND=noninteractive", *argv]
        out.append([*sudo, *argv, *(packages if len(out) == len(steps) - 1 else ())])
    return out


def run(argvs: Sequence[list[str]], by_hand: str, runner: Runner | None = None) -> None:
    """Run `argvs` in turn, their output kept unless one fails: `Unavailable` then, with its last line and `by_hand`,
    the command a person runs instead."""
    for argv in argvs:
        done = (runner or _quietly)(argv)
        if done.returncode != 0:
            said = (done.stderr or done.stdout or b"").decode(errors="replace").strip().splitlines()
            raise Unavailable(
                f"`{shlex.join(argv)}` failed (exit status {done.returncode}){': ' + said[-1] if said else ''}",
                f"run it yourself: {by_hand}",
            )


def _quietly(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, capture_output=True, check=False, stdin=subprocess.DEVNULL)
