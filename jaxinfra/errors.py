"""The small typed exception module: every user-facing failure is a list of `Problem`s.

A `Problem` names where (a spec path, a file and object), the offending value, what is wrong
and how to fix it, so the CLI can print one line per problem and never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the input: where, which value, what is wrong, how to fix it."""

    path: str
    value: Any
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path} = {self.value!r}: {self.message}; fix: {self.fix}"


@dataclass(frozen=True, slots=True)
class Refused(Problem):
    """A problem the API server itself refuses: the object is never stored, so `simulate` starts nothing (exit 2)."""


@dataclass(frozen=True, slots=True)
class Unserved(Problem):
    """An object the API server stores and a cluster would run pods for, that the simulator does not emulate (a kind
    no emulated controller runs, a TrainJob whose runtime is not JAX): `simulate` starts nothing (exit 2), since no
    verdict it gave would be the cluster's. `validate` never raises it: the API server stores these objects."""


INPUT_ERROR = 2
"""The exit status of a command stopped by its input (every problem listed, nothing written)."""
MACHINE_LIMIT = 3
"""The exit status of a command stopped by this machine, not its input: a full disk, no way to isolate pods."""


class JaxinfraError(Exception):
    """Base error: carries every problem found, so all of them are reported at once."""

    kind = "error"

    def __init__(self, problems: Iterable[Problem]):
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__(self._text())

    def _text(self) -> str:
        n = len(self.problems)
        head = f"{n} {'problem' if n == 1 else 'problems'} ({self.kind})"
        return "\n".join([head, *(f"  {p}" for p in self.problems)])


class SpecError(JaxinfraError):
    """The declared spec (stack) is invalid."""

    kind = "invalid spec"


class CatalogError(JaxinfraError):
    """An accelerator name, topology or count is not in the catalog."""

    kind = "unknown accelerator"


class ManifestError(JaxinfraError):
    """A manifest failed strict schema validation."""

    kind = "invalid manifest"


class StackError(JaxinfraError):
    """A stack file could not be loaded (missing, syntax error, raised, defines no cluster)."""

    kind = "bad stack file"


class OutputError(JaxinfraError):
    """An output path cannot be written (a file where a folder goes, a folder not writable): found before any work."""

    kind = "bad output path"


class CommandFailed(Exception):
    """A command that ran ends with a summary line and a status (1: the answer is no)."""

    def __init__(self, summary: str, status: int = INPUT_ERROR):
        super().__init__(summary)
        self.status = status
