"""`jaxinfra simulate` as a user runs it, in a child process, checked for what it must never leave behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import unprivileged
from tests.support.paths import ROOT


def simulate_cli(
    *args: str, tmp: Path, timeout: float = 180, cwd: Path = ROOT, preexec: Callable[[], None] | None = None
) -> tuple[int, dict[str, Any], str]:
    """`jaxinfra simulate ARGS --json R --no-logs` from `cwd`, in its own TMPDIR under `tmp`: its status, its JSON
    report and its output, after checking it printed no traceback, left no pod process running and nothing in that
    TMPDIR (the API server's log, the pods' files). `preexec`: run in the child before it starts (joining a cgroup)."""
    scratch = tmp / f"tmp-{time.monotonic_ns()}"
    scratch.mkdir()
    report = tmp / f"report-{time.monotonic_ns()}.json"
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "simulate", *args, "--json", str(report), "--no-logs"],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={**os.environ, "TMPDIR": str(scratch)},
        preexec_fn=preexec,
    )
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    data = json.loads(report.read_text()) if report.exists() else {}
    pods = [p for w in data.get("workloads", []) for a in w["attempts"] for p in [*a["pods"], *a.get("replaced", ())]]
    pids = [c["pid"] for p in pods for c in [p, *p.get("containers", ())] if c["pid"]]
    for pid in pids:  # every pod process (and its group) is gone
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert list(scratch.iterdir()) == [], "the API server's log or the pods' files were left behind"
    return r.returncode, data, r.stdout + r.stderr


def machine_network() -> tuple[list[str], str]:
    """This machine's own interfaces and nftables ruleset: a simulation must leave both as they were."""
    names = sorted(line.split(":")[0].strip() for line in Path("/proc/net/dev").read_text().splitlines()[2:])
    ruleset = subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True, check=False).stdout
    return names, ruleset


def simulate_as(home: Path, text: str, *args: str, as_root: bool = True) -> tuple[int, str, dict[str, Any]]:
    """`jaxinfra simulate` of the manifest `text` (through `unprivileged.run`), its HOME and TMPDIR `home` (as uid
    65534 unless `as_root`): status, output, JSON report. Nothing may be left in `home` but the manifest and the
    report."""
    manifest, report = home / "hostile.yaml", home / "report.json"
    manifest.write_text(text, encoding="utf-8")
    r = unprivileged.run(
        [sys.executable, "-m", "jaxinfra", "simulate", str(manifest), *args, "--no-logs", "--json", str(report)],
        home,
        as_root=as_root,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out
    assert r.returncode in (0, 1, 2), out
    data = json.loads(report.read_text()) if report.exists() else {}
    report.unlink(missing_ok=True)
    manifest.unlink()
    return r.returncode, out, data
