"""`jaxinfra simulate --html`: one self-contained page, rendered in headless Chromium.

Chromium loads the page from a file with its Content-Security-Policy in force, so a request
for anything outside the page (a font, a script, an image) would be refused and logged as an
error: "no console errors" also means "nothing fetched".
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.headless import Browser
from tests.support.paths import NO_RESTART, ROOT

pytestmark = pytest.mark.browser

#: The issue's aim for the default stack's report.
MAX_BYTES = 200_000

CPU_DEV = ROOT / "stacks" / "cpu_dev.py"


def simulate(tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path, dict[str, Any]]:
    html, report = tmp / "report.html", tmp / "report.json"
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "simulate", *args, "--html", str(html), "--json", str(report)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=180,
    )
    return r, html, json.loads(report.read_text())


@pytest.fixture(scope="module")
def default_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    r, html, report = simulate(
        tmp_path_factory.mktemp("html"), str(CPU_DEV)
    )  # the default stack, logs printed as usual
    assert r.returncode == 0, r.stdout + r.stderr
    return html, report


def rendered(html: Path) -> dict[str, Any]:
    """What Chromium shows of the page: title, DOM counts, text, console errors, and how much is drawn."""
    with Browser() as browser:
        page = browser.page()
        page.goto(html.as_uri())
        seen = page.evaluate("""({
            title: document.title,
            final_rows: document.querySelectorAll('table.pods.final tbody tr.pod').length,
            all_rows: document.querySelectorAll('table.pods tbody tr.pod').length,
            hosts: document.querySelectorAll('svg g.host').length,
            tracks: document.querySelectorAll('svg g.track').length,
            logs: document.querySelectorAll('tr.pod details').length,
            phases: [...document.querySelectorAll('table.pods.final tr.pod td:nth-child(4)')].map(td => td.textContent),
            text: document.body.innerText,
        })""")
        png = page.screenshot()
        seen["errors"] = page.console(("error", "warning"))
        seen["ink"] = browser.page().ink(png)
        seen["png"] = png
        return seen


def test_default_report_renders_in_chromium(default_report: tuple[Path, dict[str, Any]]) -> None:
    html, report = default_report
    pods = report["workloads"][0]["attempts"][-1]["pods"]
    seen = rendered(html)
    assert seen["errors"] == []
    assert seen["title"] == "jaxinfra simulation passed: 1 workload"
    assert seen["final_rows"] == len(pods) == 2
    assert seen["phases"] == ["succeeded", "succeeded"]
    assert seen["hosts"] == 2 and seen["tracks"] == 2 and seen["logs"] == 2  # topology, timeline, folded logs
    assert all(p["hostname"] in seen["text"] for p in pods)
    ink = seen["ink"]
    assert ink["width"] >= 1000 and ink["inked"] > 0.05 * ink["width"] * ink["height"] and ink["colours"] > 20


def test_default_report_is_small_and_self_contained(default_report: tuple[Path, dict[str, Any]]) -> None:
    html, _ = default_report
    text = html.read_text()
    assert len(text.encode()) < MAX_BYTES
    assert "<script" not in text and not re.search(r"""(src|href)\s*=\s*["'](https?:)?//""", text)
    assert "default-src 'none'" in text


def test_failed_report_shows_why(tmp_path: Path) -> None:
    r, html, report = simulate(tmp_path, NO_RESTART, "--no-logs", "--fail", "train-node-0-1")
    assert r.returncode == 1
    seen = rendered(html)
    assert seen["errors"] == []
    assert seen["title"] == "jaxinfra simulation failed: 1 workload"
    assert seen["final_rows"] == 2 and sorted(seen["phases"]) == ["failed", "failed"]
    assert "train-node-0-1: exit code 1" in seen["text"] and "injected failure (--fail)" in html.read_text()
    assert report["workloads"][0]["verdict"] == "failed"
