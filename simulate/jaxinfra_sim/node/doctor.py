"""`jaxinfra doctor`: this machine's parts (`parts`) as a person reads them (`table`) or a CI step does (`as_json`),
and with --install, what is missing installed first (`run`)."""

from __future__ import annotations

import json
import sys
from typing import Any

from jaxinfra_sim.node import parts
from jaxinfra_sim.node.parts import Status, Survey, Use


def run(run_command: bool, image: bool, egress: bool, every: bool, install: bool, as_data: bool) -> None:
    """Check this machine for the parts of the runs asked for (`every`: any run), install what they lack (`install`),
    print the table (or the JSON, `as_data`) and a summary line; `Unavailable` (exit 3) naming every missing part."""
    used = parts.ALL if every else parts.uses(run_command, egress, ["archive"] if image else [])
    found = parts.survey(parts.Machine.here(used, versions=not install or as_data), used)
    if install and (line := found.install_line()):  # (none: nothing to install, or no package manager known here)
        print(f"jaxinfra: installing {' '.join(found.packages())} ({line})", file=sys.stderr)
        parts.install(found)
        found = parts.survey(parts.Machine.here(used, versions=as_data), used)
    if as_data:
        print(json.dumps(as_json(found), indent=2))
    elif not install:
        print(table(found))
    if (missing := found.unavailable()) is not None:
        raise missing
    off = [r.part.name for r in found.rows if r.status is Status.OFF]
    print(
        "jaxinfra: every part these simulations need is here" + (f" ({', '.join(off)}: off)" if off else ""),
        file=sys.stderr,
    )


def table(survey: Survey) -> str:
    """The rows as a text table: part, status, where it was found, its version, what needs it."""
    head = ("part", "status", "found where", "version", "needed by")
    rows = [head] + [
        (
            r.part.name,
            r.status.value,
            r.found.where if r.found else (r.cause or "not installed"),
            r.found.version if r.found else "",
            _needed_by(r.part.use),
        )
        for r in survey.rows
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines + [f"warning: {w}" for w in survey.warnings()])


def as_json(survey: Survey) -> dict[str, Any]:
    """The rows as data (`--json`): each part's status, where, version, package and warnings; the install command and
    the refusal."""
    return {
        "ready": not survey.missing,
        "platform": survey.machine.platform,
        "distribution": survey.machine.distro.name or survey.machine.distro.id,
        "root": survey.machine.root,
        "parts": [
            {
                "part": r.part.name,
                "status": r.status.value,
                "required": r.part.required,
                "needed": r.needed,
                "needed_by": _needed_by(r.part.use),
                "purpose": r.part.purpose,
                "where": r.found.where if r.found else None,
                "version": r.found.version if r.found else None,
                "cause": r.cause or None,
                "package": r.part.packages.get(survey.machine.distro.family or "debian"),
                "warnings": list(r.warnings),
            }
            for r in survey.rows
        ],
        "install": survey.install_line() or None,
        "problem": str(err) if (err := survey.unavailable()) else None,
    }


def _needed_by(use: Use) -> str:
    """What needs a part, as a person reads it."""
    return {
        Use.SANDBOX: "every simulation",
        Use.NETWORK: "every simulation",
        Use.LIMITS: "pods' limits",
        Use.EGRESS: "--egress (default)",
        Use.RUN_COMMAND: "--run-command",
        Use.SUBORDINATE: "--run-command, unprivileged",
        Use.LAYOUT: "--image (OCI layout, archive)",
        Use.ARCHIVE: "--image (docker save archive)",
    }[use]
