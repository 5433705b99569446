"""Run a command as an unprivileged user, even from root: how most people run the simulator.

As root, the command runs as uid/gid 65534 (nobody) with no capabilities, a scratch HOME and
TMPDIR it owns. Directories on the way to this Python that such a user could not enter (pyenv
under /root, mode 700) are opened to it in a private mount namespace only: a tmpfs over the closed
directory, with just the needed entries bound back in. Nothing on the machine changes. As a
non-root user, the command runs as that user.

`--deny-unshare` installs a seccomp filter that fails unshare(2) with EPERM, as a container
runtime's default profile does (Docker's), to rehearse a machine without namespaces.

    python tests/support/unprivileged.py [--root] [--deny-unshare] -- CMD [ARGS...]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import shlex
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
SUBORDINATE = (100000, 65536)
"""The unprivileged user's subordinate ids (first, count): useradd's defaults (login.defs SUB_UID_START and _COUNT)."""


def _closed_dirs(paths: Sequence[Path]) -> dict[Path, set[str]]:
    """Directories on the way to `paths` that others may not enter, each with the entries to show."""
    closed: dict[Path, set[str]] = {}
    for path in paths:
        parts = path.resolve().parts
        for depth in range(1, len(parts)):
            folder = Path(*parts[:depth])
            if not folder.stat().st_mode & stat.S_IXOTH:
                closed.setdefault(folder, set()).add(parts[depth])
    return closed


def _open_script(closed: Mapping[Path, set[str]], save: Path) -> str:
    """Shell steps that show each closed directory's needed entries through a world-readable tmpfs."""
    steps = []
    for i, (folder, entries) in enumerate(sorted(closed.items(), key=lambda item: len(item[0].parts))):
        keep = save / str(i)
        steps += [
            f"mkdir -p {shlex.quote(str(keep))}",
            f"mount --bind {shlex.quote(str(folder))} {shlex.quote(str(keep))}",
            f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(str(folder))}",
        ]
        for entry in sorted(entries):
            source, target = keep / entry, folder / entry
            steps.append(("mkdir" if target.is_dir() else "touch") + f" {shlex.quote(str(target))}")
            steps.append(f"mount --bind {shlex.quote(str(source))} {shlex.quote(str(target))}")
    return "\n".join(steps)


def scratch_home() -> Path:
    """A fresh folder the unprivileged user owns, reachable by it (under /tmp)."""
    home = Path(tempfile.mkdtemp(prefix="jaxinfra-nonroot-", dir="/tmp"))
    if os.getuid() == 0:
        os.chown(home, NOBODY, NOBODY)
    return home


def cache_env(home: Path, as_root: bool) -> dict[str, str]:
    """The env that gives a simulation run as root by `run` an image cache of its own beside `home`, `HOME-root`
    (root never uses a cache in a folder another user owns, as `home` is, and would otherwise use its own home's);
    unprivileged, the default in `home`. Whoever removes `home` removes `HOME-root` too."""
    if not (as_root and os.geteuid() == 0):
        return {}
    Path(f"{home}-root").mkdir(mode=0o700, exist_ok=True)
    return {"XDG_CACHE_HOME": f"{home}-root"}


def command(
    argv: Sequence[str], home: Path, *, as_root: bool = False, deny_unshare: bool = False, subordinate: bool = True
) -> tuple[list[str], dict[str, str], Path | None]:
    """(argv, env, folder to remove afterwards) that run `argv` unprivileged (unless `as_root`), HOME and TMPDIR in
    `home`; with `subordinate`, the user has subordinate ids (/etc/subuid and /etc/subgid, `SUBORDINATE`) as a
    user made by useradd has, else none."""
    argv = list(argv)
    if deny_unshare:
        argv = [sys.executable, str(Path(__file__).resolve()), "--exec-denied", "--", *argv]
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(home)}
    if as_root or os.getuid() != 0:
        return argv, env, None
    env.update(USER="nobody", LOGNAME="nobody")
    save = Path(tempfile.mkdtemp(prefix="jaxinfra-open-"))
    needed = [Path(sys.executable), Path(sys.prefix), Path(sys.base_prefix), ROOT, home]
    drop = [
        "setpriv",
        f"--reuid={NOBODY}",
        f"--regid={NOBODY}",
        "--clear-groups",
        "--inh-caps=-all",  # a login's bounding set stays whole: newuidmap (setuid root) works as for any user
        "--",
    ]
    script = _open_script(_closed_dirs(needed), save)
    if subordinate:  # as useradd gives every new user (login.defs SUB_UID_START, SUB_UID_COUNT), here only: a copy of
        # /etc bound over it whole (one mount, nothing bound beneath, which a user namespace could not overlay)
        etc = shlex.quote(str(save / "etc"))
        script += f"\ncp -a /etc {etc}"
        for name in ("subuid", "subgid"):
            script += f"\necho nobody:{SUBORDINATE[0]}:{SUBORDINATE[1]} > {etc}/{name}"
        script += f"\nmount --bind {etc} /etc"
    script += '\nexec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script, "sh", *drop, *argv], env, save


def run(
    argv: Sequence[str],
    home: Path,
    *,
    as_root: bool = False,
    deny_unshare: bool = False,
    subordinate: bool = True,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run` of `argv` as the unprivileged user (see `command`)."""
    full, env, save = command(argv, home, as_root=as_root, deny_unshare=deny_unshare, subordinate=subordinate)
    try:
        return subprocess.run(full, env={**env, **kwargs.pop("env", {})}, **kwargs)
    finally:
        if save is not None:
            shutil.rmtree(save, ignore_errors=True)  # empty: its mounts lived in the command's namespace only


# --- the seccomp filter -------------------------------------------------------------------

_ARCH = {"x86_64": (0xC000003E, 272), "aarch64": (0xC00000B7, 97)}  # AUDIT_ARCH_*, __NR_unshare
_EPERM = 1
_SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_RET_K = 0x20, 0x15, 0x06


def deny_unshare() -> None:
    """From now on (and across exec) unshare(2) fails with EPERM in this process and its children."""
    arch, unshare_nr = _ARCH[platform.machine()]
    program = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_BPF_JEQ_K, 0, 3, arch),  # another ABI: allow
        (_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        (_BPF_JEQ_K, 0, 1, unshare_nr),
        (_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO | _EPERM),
        (_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
    ]
    filters = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *ins) for ins in program))
    fprog = struct.pack("HxxxxxxP", len(program), ctypes.addressof(filters))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    buf = ctypes.create_string_buffer(fprog)
    if libc.prctl(22, 2, ctypes.c_void_p(ctypes.addressof(buf)), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", action="store_true", help="stay root (only --deny-unshare applies)")
    parser.add_argument("--deny-unshare", action="store_true", help="unshare(2) fails with EPERM")
    parser.add_argument("--exec-denied", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("argv", nargs="+")
    args = parser.parse_args()
    if args.exec_denied:
        deny_unshare()
        os.execvp(args.argv[0], args.argv)
    home = scratch_home()
    try:
        code = run(args.argv, home, as_root=args.root, deny_unshare=args.deny_unshare).returncode
    finally:
        shutil.rmtree(home, ignore_errors=True)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
