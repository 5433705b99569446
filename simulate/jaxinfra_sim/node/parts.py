"""This machine's parts that a simulation uses, checked all at once before anything starts.

A cluster's node comes with its kernel features, CNI plugins and container runtime installed (the kubelet, containerd
and the CNI plugins are a node image's packages); here the simulator borrows this machine's. Each `Part` is one of
them: the use that needs it (every simulation, egress, `--run-command`, `--image`), what it does there, whether a run
goes on without it (with a note), and the package that brings it on each family of distributions. `Machine` is what
one machine has (`Machine.here()` looks; the tests describe one by hand: a macOS laptop, a kernel without user
namespaces, a Debian without the CNI plugins); `survey` sets the two side by side, a `Row` a part. `require` refuses a
run that lacks any part it needs, naming every one at once with the one command that installs them all
(`Unavailable`, exit status 3: the machine's limit, not a verdict on the job); `install` runs that command.

A part whose version is `advised` (runc) is read against its known vulnerabilities (`runc_advisories`), less those
the distribution's changelog for the package names (a backport, as Debian's security updates carry:
/usr/share/doc/runc/changelog.Debian.gz). Installing is the distribution's package manager's (`package_manager`);
showing the rows, `jaxinfra doctor`'s (`doctor`).
"""

from __future__ import annotations

import enum
import functools
import gzip
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jaxinfra_sim.core.errors import Unavailable
from jaxinfra_sim.core.programs import find
from jaxinfra_sim.network.netns_egress import EGRESS_TOOLS
from jaxinfra_sim.network.netns_workers import CNI_DIRS, CNI_PLUGINS, cni_dir
from jaxinfra_sim.node import package_manager, runc_advisories
from jaxinfra_sim.runtime import runc

VERSION_TIMEOUT_S = 5.0
"""How long a program may take to print its version (a Go binary starts in milliseconds; this is for a stuck one)."""


class Use(enum.Flag):
    """What a run does that needs a part of this machine."""

    SANDBOX = enum.auto()  # every simulation: each pod's own namespaces
    NETWORK = enum.auto()  # every simulation: each pod's network namespace, wired and policed
    LIMITS = enum.auto()  # every simulation: the kernel's controllers that enforce the pods' limits
    EGRESS = enum.auto()  # --egress (the default): pods reach beyond the simulation
    RUN_COMMAND = enum.auto()  # --run-command: each container under an OCI runtime
    SUBORDINATE = enum.auto()  # --run-command by an unprivileged user: containers' ids beyond the caller's own
    LAYOUT = enum.auto()  # --image of an OCI image layout (or an archive, converted to one)
    ARCHIVE = enum.auto()  # --image of a `docker save` archive
    EVERY_RUN = SANDBOX | NETWORK | LIMITS


ALL = Use.EVERY_RUN | Use.EGRESS | Use.RUN_COMMAND | Use.SUBORDINATE | Use.LAYOUT | Use.ARCHIVE
"""Every part any run can use (`jaxinfra doctor --all`)."""


def uses(run_command: bool, egress: bool, images: Iterable[str | None] = (), root: bool | None = None) -> Use:
    """What a `jaxinfra simulate` run uses: `images` are the kinds of the images it is given (`oci_image.kind`:
    "layout", "archive", "folder"); `root` whether it runs as root (default: this process's)."""
    root = os.geteuid() == 0 if root is None else root
    found = Use.EVERY_RUN
    if egress:
        found |= Use.EGRESS
    if run_command:
        found |= Use.RUN_COMMAND if root else Use.RUN_COMMAND | Use.SUBORDINATE
    kinds = set(images)
    if kinds & {"layout", "archive"}:
        found |= Use.LAYOUT
    if "archive" in kinds:
        found |= Use.ARCHIVE
    return found


class Kind(enum.Enum):
    """How a part is found."""

    KERNEL = "kernel"  # the platform: Linux, and its release
    NAMESPACES = "namespaces"  # a container's start rehearsed (`sandbox.preflight`)
    CNI = "cni"  # the CNI plugins, in one of `CNI_DIRS`
    PROGRAM = "program"  # every program named, on PATH or in `programs.SBIN`
    ANY_PROGRAM = "any program"  # the first program named that is there
    CGROUP = "cgroup"  # a controller this process can make limited groups with (`cgroupfs.probe`)


@dataclass(frozen=True)
class Part:
    """One part of the machine a simulation uses."""

    name: str
    kind: Kind
    use: Use
    purpose: str  # what it does for the simulation
    required: bool = True  # False: a run goes on without it, and its report says what is off
    programs: tuple[str, ...] = ()
    packages: Mapping[str, str] = field(default_factory=dict)  # family of distributions -> package
    version: tuple[str, ...] | None = ("--version",)  # the arguments that make its program print its version
    advised: bool = False  # its version is read against `runc_advisories` (and its package's changelog)


PARTS: tuple[Part, ...] = (
    Part("Linux", Kind.KERNEL, Use.SANDBOX, "pods are its processes, in its namespaces"),
    Part(
        "user namespaces",
        Kind.NAMESPACES,
        Use.SANDBOX,
        "each pod gets its own user, mount, UTS and PID namespaces (its /etc/hosts, hostname, identity)",
    ),
    Part(
        "CNI plugins",
        Kind.CNI,
        Use.NETWORK,
        "they wire each pod's network namespace, as containerd's CRI does",
        programs=CNI_PLUGINS,
        packages={"debian": "containernetworking-plugins", "fedora": "containernetworking-plugins"},
        version=(),  # a plugin run without CNI_COMMAND prints its version and the protocol's
    ),
    Part(
        "ip",
        Kind.PROGRAM,
        Use.NETWORK,
        "it makes the pods' gateway",
        programs=("ip",),
        packages={"debian": "iproute2", "fedora": "iproute"},
        version=("-V",),
    ),
    Part(
        "nft",
        Kind.PROGRAM,
        Use.NETWORK,
        "it loads NetworkPolicy's and kube-proxy's rules",
        programs=("nft",),
        packages={"debian": "nftables", "fedora": "nftables"},
    ),
    Part(
        "egress",
        Kind.ANY_PROGRAM,
        Use.EGRESS,
        "it lets pods reach beyond the simulation, as on GKE (without it: egress off, a note)",
        required=False,
        programs=EGRESS_TOOLS,
        packages={"debian": "slirp4netns", "fedora": "passt"},
    ),
    *(
        Part(
            f"{name} cgroup",
            Kind.CGROUP,
            Use.LIMITS,
            f"it enforces the pods' {what} (without it: not enforced, a note)",
            required=False,
        )
        for name, what in (("memory", "memory limits"), ("cpu", "CPU limits"), ("pids", "process limits"))
    ),
    # runc only: crun 1.8 (Debian 12) refuses a machine whose cgroup v1 controllers sit beside a v2 hierarchy that
    # still holds one ("cgroups in hybrid mode not supported"), as this project's machines have; runc takes it.
    Part(
        "runc",
        Kind.PROGRAM,
        Use.RUN_COMMAND,
        "--run-command runs each container under it",
        programs=("runc",),
        packages={"debian": "runc", "fedora": "runc"},
        advised=True,
    ),
    Part(
        "newuidmap",
        Kind.PROGRAM,
        Use.SUBORDINATE,
        "it gives an unprivileged user's containers its subordinate ids",
        programs=("newuidmap", "newgidmap"),
        packages={"debian": "uidmap", "fedora": "shadow-utils"},
        version=None,  # none to print
    ),
    Part(
        "umoci",
        Kind.PROGRAM,
        Use.LAYOUT,
        "--image unpacks OCI image layouts with it",
        programs=("umoci",),
        packages={"debian": "umoci", "fedora": "umoci"},
    ),
    Part(
        "bwrap",
        Kind.PROGRAM,
        Use.LAYOUT,
        "--image runs umoci and skopeo in its sandbox: nothing of the machine is theirs to write",
        programs=("bwrap",),
        packages={"debian": "bubblewrap", "fedora": "bubblewrap"},
    ),
    Part(
        "nsenter",
        Kind.PROGRAM,
        Use.LAYOUT,
        "as root, umoci and skopeo enter the containers' ids with it; prlimit bounds what they write",
        programs=("nsenter", "prlimit"),
        packages={"debian": "util-linux", "fedora": "util-linux"},
    ),
    Part(
        "skopeo",
        Kind.PROGRAM,
        Use.ARCHIVE,
        "--image converts `docker save` archives with it",
        programs=("skopeo",),
        packages={"debian": "skopeo", "fedora": "skopeo"},
    ),
)


# --- what a machine has --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """Where a part is on a machine (a path, or what stands for it), its version, and what else was learned."""

    where: str
    version: str = ""
    backported: frozenset[str] = frozenset()  # CVE ids its distribution's changelog names (runc)


@dataclass(frozen=True)
class Distro:
    """The distribution, from os-release(5): its ID, ID_LIKE and PRETTY_NAME."""

    id: str = ""
    like: tuple[str, ...] = ()
    name: str = ""

    @property
    def family(self) -> str | None:
        """ "debian" (apt: Debian, Ubuntu and theirs), "fedora" (dnf: Fedora, RHEL and theirs), or None."""
        ids = {self.id, *self.like}
        if ids & {"debian", "ubuntu"}:
            return "debian"
        if ids & {"fedora", "rhel", "centos"}:
            return "fedora"
        return None

    @classmethod
    def read(cls, paths: Sequence[str] = ("/etc/os-release", "/usr/lib/os-release")) -> Distro:
        for path in paths:
            try:
                text = Path(path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            fields = {}
            for line in text.splitlines():
                key, sep, value = line.partition("=")
                if sep:
                    fields[key.strip()] = value.strip().strip("\"'")
            return cls(fields.get("ID", ""), tuple(fields.get("ID_LIKE", "").split()), fields.get("PRETTY_NAME", ""))
        return cls()


@dataclass(frozen=True)
class Machine:
    """What one machine has of `PARTS`: `found`, a part's name -> where; `why`, a part that is not there -> (cause,
    fix), where the kernel said why (user namespaces, a controller); a part in neither is not installed."""

    platform: str
    root: bool
    distro: Distro
    found: Mapping[str, Found]
    why: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def family(self) -> str | None:
        """Its distribution's family, whose package manager installs the parts (`package_manager`); None off Linux."""
        return self.distro.family if self.platform == "linux" else None

    @classmethod
    def here(cls, looked_for: Use = ALL, versions: bool = False) -> Machine:
        """This machine, looked at for the parts of `looked_for`; with `versions`, each program's version (runc's
        always: its advisories)."""
        found: dict[str, Found] = {}
        why: dict[str, tuple[str, str]] = {}
        linux = sys.platform == "linux"
        wanted = [p for p in PARTS if p.use & looked_for]
        for part in wanted:
            if part.kind is Kind.KERNEL:
                if linux:
                    found[part.name] = Found(f"kernel {platform.release()}", platform.machine())
            elif not linux:
                continue
            elif part.kind is Kind.NAMESPACES:
                _namespaces(part, found, why)
            elif part.kind is Kind.CGROUP:
                _cgroup(part, found, why)
            elif part.kind is Kind.CNI:
                folder = cni_dir()
                if all(os.access(os.path.join(folder, name), os.X_OK) for name in part.programs):
                    path = os.path.join(folder, part.programs[0])
                    found[part.name] = Found(folder, _version(part, path) if versions else "")
            else:
                paths = [find(name) for name in part.programs]
                there = [p for p in paths if p is not None]
                if (there and part.kind is Kind.ANY_PROGRAM) or (there and len(there) == len(paths)):
                    found[part.name] = _program(part, there[0], versions)
        return cls(sys.platform, os.geteuid() == 0, Distro.read(), found, why)


def _program(part: Part, path: str, versions: bool) -> Found:
    if not part.advised:
        return Found(path, _version(part, path) if versions else "")
    return _advised(path)


@functools.cache
def _advised(path: str) -> Found:
    """runc's version (with its distribution's package version, where it prints one) and the CVEs its package's
    changelog names: read once a process (a run checks it before an image is unpacked and again before its pods)."""
    text = _run([path, "--version"])
    first = text.splitlines()[0].removeprefix("runc version ").strip() if text else ""
    commit = next((line.partition(":")[2].strip() for line in text.splitlines() if line.startswith("commit:")), "")
    if commit and commit != first and not re.fullmatch(r"[0-9a-f]{7,}", commit):  # a distribution's package version
        first = f"{first} (package {commit})"
    return Found(path, first, frozenset(_changelog_cves(path)))


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(
            argv, capture_output=True, timeout=VERSION_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (done.stdout or done.stderr).decode(errors="replace")


def _version(part: Part, path: str) -> str:
    """The first line `part`'s program prints for its version, less its own name; a CNI plugin built without one
    (Debian's say "version unknown"), the newest protocol it speaks."""
    if part.version is None:
        return ""
    lines = _run([path, *part.version]).strip().splitlines()
    if not lines:
        return ""
    name = re.escape(os.path.basename(path))
    first = re.sub(rf"^(CNI {name} plugin |{name} (version |utility, )?)", "", lines[0]).strip()
    protocols = next((line.rpartition(" ")[2] for line in lines if "versions supported:" in line), None)
    return f"protocol {protocols}" if first == "version unknown" and protocols else first


def _changelog_cves(path: str) -> set[str]:
    """The CVE ids the distribution's changelog of the package holding `path` names: Debian's changelog.Debian.gz,
    else rpm's changelog (fixes a distribution backported without changing the upstream version)."""
    name = os.path.basename(path)
    text = ""
    try:
        with gzip.open(f"/usr/share/doc/{name}/changelog.Debian.gz", "rt", errors="replace") as f:
            text = f.read(4 << 20)
    except OSError:
        if rpm := find("rpm"):
            text = _run([rpm, "-q", "--changelog", "-f", path])
    return set(re.findall(r"CVE-\d{4}-\d{4,}", text))


def _namespaces(part: Part, found: dict[str, Found], why: dict[str, tuple[str, str]]) -> None:
    from jaxinfra_sim.runtime import sandbox

    try:
        strategy = sandbox.preflight()
    except Unavailable as err:
        why[part.name] = (err.cause, err.fix)
        return
    found[part.name] = Found(
        "root's (every id mapped)" if strategy == "privileged" else "unprivileged (your own ids mapped)", strategy
    )


def _cgroup(part: Part, found: dict[str, Found], why: dict[str, tuple[str, str]]) -> None:
    from jaxinfra_sim.node import cgroupfs

    name = part.name.removesuffix(" cgroup")
    controllers = cgroupfs.probe()
    controller = getattr(controllers, name)
    if controller is None:
        reason = getattr(controllers, f"{name}_reason")
        why[part.name] = (reason, "delegate the controller to this user (systemd: Delegate=yes), or run as root")
    else:
        found[part.name] = Found(str(controller.group), f"cgroup v{controller.version}")


# --- the two side by side ------------------------------------------------------------------------------------------


class Status(enum.StrEnum):
    """A part's state for one run."""

    OK = "ok"
    WARNING = "warning"  # there, with a known vulnerability (runc)
    MISSING = "missing"  # needed, and the run cannot go without it
    OFF = "off"  # needed, and the run goes on without it (a note says what is off)
    UNUSED = "unused"  # not there, and this run does not use it


@dataclass(frozen=True)
class Row:
    """One part against one machine, for one run: where it is, whether the run needs it, what is wrong."""

    part: Part
    found: Found | None
    needed: bool  # the run uses it
    cause: str = ""  # why it is not there (the kernel's reason), where known
    fix: str = ""  # what makes it work, where no package brings it
    warnings: tuple[str, ...] = ()

    @property
    def status(self) -> Status:
        if self.found is not None:
            return Status.WARNING if self.warnings else Status.OK
        if not self.needed:
            return Status.UNUSED
        return Status.MISSING if self.part.required else Status.OFF


@dataclass(frozen=True)
class Survey:
    """Every part for one run on one machine."""

    machine: Machine
    uses: Use
    rows: tuple[Row, ...]

    @property
    def missing(self) -> list[Row]:
        """The parts the run needs and cannot go without."""
        return [r for r in self.rows if r.status is Status.MISSING]

    def packages(self, optional: bool = True) -> list[str]:
        """The packages that bring what the run uses and this machine lacks (`optional`: those it can go without
        too), in this machine's distribution family's names (Debian's where it has none)."""
        family = self.machine.distro.family or "debian"
        wanted = {Status.MISSING, Status.OFF} if optional else {Status.MISSING}
        rows = [r for r in self.rows if r.status in wanted]
        return list(dict.fromkeys(r.part.packages[family] for r in rows if r.part.packages))

    def install_line(self, optional: bool = True) -> str:
        """The one command that installs `packages` here ("" where none is wanted or this family has none)."""
        m = self.machine
        return " && ".join(shlex.join(a) for a in package_manager.commands(m.family, m.root, self.packages(optional)))

    def unavailable(self) -> Unavailable | None:
        """Every part the run needs and lacks, at once, and one fix for them all; None where nothing is missing."""
        missing = self.missing
        if not missing:
            return None
        if self.machine.platform != "linux":
            from jaxinfra_sim.runtime.sandbox import diagnose

            return Unavailable(*diagnose(self.machine.platform, 0, [], {}, 0))
        programs = [r for r in missing if r.part.packages]
        kernel = [r for r in missing if not r.part.packages]
        causes = [r.cause or f"no {r.part.name} ({r.part.purpose})" for r in kernel]
        if programs:
            causes.insert(0, "missing " + ", ".join(f"{_named(r.part)} ({r.part.purpose})" for r in programs))
        fixes = [self.install_line(optional=False) or _by_hand(self.packages(optional=False))] if programs else []
        fixes += [r.fix for r in kernel if r.fix]
        return Unavailable("; ".join(causes), "; ".join(fixes))

    def warnings(self) -> list[str]:
        return [w for r in self.rows if r.needed for w in r.warnings]


def survey(machine: Machine, used: Use, shown: Use | None = None) -> Survey:
    """`machine`'s parts against what a run `used`; `shown`: the parts listed (default: those it uses)."""
    rows = []
    for part in PARTS:
        if not part.use & (shown if shown is not None else used):
            continue
        found = machine.found.get(part.name)
        cause, fix = machine.why.get(part.name, ("", ""))
        warnings = tuple(runc_advisories.advisories(found.version, found.backported)) if found and part.advised else ()
        if found is None and part.kind is Kind.CNI and not cause:
            cause = f"not in {', '.join(CNI_DIRS)}"
        rows.append(Row(part, found, bool(part.use & used), cause, fix, warnings))
    return Survey(machine, used, tuple(rows))


@functools.cache
def runc_trusted() -> tuple[runc.Trusted, ...]:
    """What this machine's runc takes as it finds it in a container's tree, for each known hole it has
    (`runc_advisories.trusted`, less its distribution's backports): read once a process."""
    found = Machine.here(Use.RUN_COMMAND).found.get("runc")
    return runc_advisories.trusted(found.version, found.backported) if found is not None else ()


def require(used: Use, machine: Machine | None = None) -> Survey:
    """Refuse (`Unavailable`, exit status 3) a run that lacks any part it uses and cannot go without, naming every one
    at once with the command that installs them; the survey otherwise (its warnings are the report's notes)."""
    found = survey(machine or Machine.here(used), used)
    if (err := found.unavailable()) is not None:
        raise err
    return found


def install(found: Survey, run: package_manager.Runner | None = None) -> list[str]:
    """Install what `found` lacks (the parts the run can go without too) with this machine's package manager,
    quietly; the packages installed. `Unavailable` where it cannot (no known package manager, no sudo, the manager
    failed), with what to run by hand. `run`: runs one command (the tests' stand-in)."""
    packages = found.packages()
    if not packages:
        return []
    m = found.machine
    argvs = package_manager.commands(m.family, m.root, packages, quiet=True)
    if not argvs:  # no package manager known here: what the run cannot go without is named, with Debian's names
        if (err := found.unavailable()) is not None:
            raise err
        return []
    if not m.root and find("sudo") is None:
        raise Unavailable(
            f"installing {', '.join(packages)} needs root, and sudo is not installed",
            f"as root: {' && '.join(shlex.join(a) for a in package_manager.commands(m.family, True, packages))}",
        )
    package_manager.run(argvs, found.install_line(), run)
    return packages


def _named(part: Part) -> str:
    if part.kind is Kind.CNI:
        return f"the CNI plugins {' and '.join(part.programs)}"
    if part.kind is Kind.ANY_PROGRAM:
        return " or ".join(part.programs)
    return " and ".join(f"`{p}`" for p in part.programs)


def _by_hand(packages: Sequence[str]) -> str:
    """The fix where this machine's package manager is not one known here: the packages by Debian's names."""
    return (
        f"install them with your distribution's package manager (Debian's packages: {', '.join(packages)}; the CNI "
        f"plugins go in one of {', '.join(CNI_DIRS)})"
    )
