"""The small typed exception module: every user-facing failure is a list of `Problem`s.

A `Problem` names where (a spec path, a file and object), the offending value, what is wrong
and how to fix it, so the CLI can print one line per problem and never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the input: where, which value, what is wrong, how to fix it.

    Where is structured: the file (a manifest file, a stack file, a command-line flag's own name), the document's
    place in a multi-document file (from 0), and `path`, the object and field inside it (`Job/default/x
    spec.template.spec`, a stack's `cluster.pools[0]`). `where` formats them, the one place that does."""

    path: str
    value: Any
    message: str
    fix: str
    file: str | None = None
    document: int | None = None

    @property
    def where(self) -> str:
        """`file#document path` for a document of a manifest file, `file: path` for a stack file, else `path`."""
        if self.file is None:
            return self.path
        head = self.file if self.document is None else f"{self.file}#{self.document}"
        if not self.path:
            return head
        return f"{head} {self.path}" if self.document is not None else f"{head}: {self.path}"

    def located(self, file: str, document: int | None = None) -> Problem:
        """The problem in `file` (its `document`), unless it already names its file."""
        return self if self.file is not None else replace(self, file=file, document=document)

    def __str__(self) -> str:
        return f"{self.where} = {self.value!r}: {self.message}; fix: {self.fix}"


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
UNDETERMINED = 4
"""The exit status of a simulation that nothing failed but that could not give every verdict: under the probe, a
workload whose commands may compute the contract its env lacks (`jaxinfra simulate --run-command` runs them)."""


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
