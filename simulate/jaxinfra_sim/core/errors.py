"""The simulator's own failures, one class per kind, all of them `SimulatorError`s.

What is wrong with the manifests is a `Problem` (reported, never raised) or an `UnsafePath`; what is raised here is
the simulator, or this machine, failing to do what a cluster would. Each kind also derives from the class its callers
have always caught (an errno's OSError, `jaxinfra.errors`' exit statuses), so `except OSError`,
`except ValueError` and `entry.status` treat it as before.

Not here, on purpose: the probe's `CheckFailed` (it runs in the pods, which import nothing of the simulator), the
holder's errors (`netns_holder` and its modules: the standard library only), `selectors.SelectorError` (a request the
API server answers with 400, not a failure), and the builtins a protocol asks for (json's TypeError, an import's
ModuleNotFoundError, the kernel's errno relayed as an OSError).
"""

from __future__ import annotations

import os

from jaxinfra.errors import MACHINE_LIMIT, CommandFailed, ManifestError, Problem


class SimulatorError(Exception):
    """The simulator could not do what a cluster would: `except SimulatorError` catches every kind below."""


class StepFailed(SimulatorError, OSError):
    """One step the kernel refused on the way to running a pod: which step (`step`), and the errno."""

    def __init__(self, step: str, code: int):
        super().__init__(code, f"{step}: {os.strerror(code)}")
        self.step = step


class RootError(StepFailed):
    """One step of building a container's root filesystem failed (`rootfs`)."""


class SandboxError(StepFailed):
    """One step of entering a pod's sandbox failed, so its process cannot start (`sandbox`)."""


class NetworkError(StepFailed):
    """A step on the way into the pods' network failed, or its holder is gone (`netns`)."""


class Unavailable(SimulatorError, CommandFailed):
    """No pod can get its own namespaces here: the cause and its fix, in one line (exit status 3, the machine's
    limit: not a verdict on the job)."""

    def __init__(self, cause: str, fix: str):
        super().__init__(f"cannot simulate here: {cause}; fix: {fix}", MACHINE_LIMIT)
        self.cause, self.fix = cause, fix


class MachineLimit(SimulatorError, CommandFailed):
    """This machine cannot hold what a job needs, or gave out while it ran (memory, processes, descriptors): the
    figures and the fix in one line, exit status 3 — the machine's verdict, not the job's."""

    def __init__(self, message: str):
        super().__init__(message, MACHINE_LIMIT)


class UnsafePath(SimulatorError, ManifestError, ValueError):
    """A manifest value that would name, or reach, a host path outside the simulation's own folders."""

    kind = "unsafe path in a manifest"

    def __init__(self, what: str, value: object, why: str, fix: str):
        super().__init__([Problem(what, value, why, fix)])
        self.why = why


class ApiServerError(SimulatorError, RuntimeError):
    """The simulated API server's process did not answer as asked (started twice, not running, gone silent): the
    pipe between it and the simulator broke."""


class InvalidArgument(SimulatorError, ValueError):
    """A value the simulator was called with that it cannot use (an unknown strategy, a limit not above zero, more
    pods than an address range holds): the caller's mistake, not a manifest's."""
