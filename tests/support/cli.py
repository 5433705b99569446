"""`jaxinfra simulate` as a user runs it, in a child process, checked for what it must never leave behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.paths import ROOT


def simulate_cli(*args: str, tmp: Path, timeout: float = 150) -> tuple[int, dict[str, Any], str]:
    """`jaxinfra simulate ARGS --json R --no-logs` in its own TMPDIR under `tmp`: its status, its JSON report and its
    output, after checking it printed no traceback and left nothing in that TMPDIR (the API server's log, the pods'
    files)."""
    scratch = tmp / f"tmp-{time.monotonic_ns()}"
    scratch.mkdir()
    report = tmp / f"report-{time.monotonic_ns()}.json"
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "simulate", *args, "--json", str(report), "--no-logs"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert list(scratch.iterdir()) == [], "the API server's log or the pods' files were left behind"
    return r.returncode, json.loads(report.read_text()) if report.exists() else {}, r.stdout + r.stderr
