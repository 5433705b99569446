"""What a pod prints cannot steer the terminal it is shown on (simulate/jaxinfra_sim/core/printable.py): a pod that
prints a green "simulation passed" in escape sequences, a carriage return that would overwrite the line, or a C1 control
shows them as `\\xNN` on the simulator's terminal, in the JSON report and in the HTML page."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from jaxinfra.yamlio import dump
from jaxinfra_sim.core.printable import printable
from tests.support import unprivileged
from tests.support.paths import ROOT

pytestmark = pytest.mark.simulator

#: A fake verdict in green, a progress line a carriage return would rewrite, a C1 CSI (U+009B in UTF-8), a bell, a
#: tab; on stdout and, for the JSON report's stderr tail, on stderr.
LINES = (
    r"printf '\033[32msimulation passed\033[0m\n'; printf 'progress 10%%\rprogress 100%%\n'; "
    r"printf '\302\233' ; printf '2J cleared\a\tend\n'; printf '\033]0;title\007\033[32mfake\033[0m\n' >&2"
)


def test_printable_escapes_c0_and_c1_controls_but_the_tab() -> None:
    assert printable("\x1b[32mok\x1b[0m") == "\\x1b[32mok\\x1b[0m"
    assert printable("10%\r100%") == "10%\\x0d100%"
    assert printable("a\tb") == "a\tb"
    assert printable("\x00\x7f\x9b\x85 é ✓") == "\\x00\\x7f\\x9b\\x85 é ✓"
    assert printable(printable("\x1b")) == "\\x1b"  # escaping twice changes nothing more


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "unprivileged"])
def test_a_pods_escape_sequences_never_reach_the_terminal_the_report_or_the_page(home: Path, as_root: bool) -> None:
    manifest, report, page = home / "job.yaml", home / "report.json", home / "report.html"
    manifest.write_text(
        dump(
            [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {"name": "paint"},
                    "spec": {
                        "completionMode": "Indexed",
                        "completions": 1,
                        "backoffLimit": 0,
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "w", "image": "busybox:1.28", "command": ["sh", "-c", LINES]}],
                            }
                        },
                    },
                }
            ]
        ),
        encoding="utf-8",
    )
    argv = [sys.executable, "-m", "jaxinfra", "simulate", str(manifest), "--run-command", "--timeout", "60"]
    r = unprivileged.run(
        [*argv, "--json", str(report), "--html", str(page)],
        home,
        as_root=as_root,
        cwd=ROOT,
        capture_output=True,
        timeout=120,
        env={"TERM": "xterm-256color", "NO_COLOR": "1"},
    )
    out = r.stdout + r.stderr
    assert b"Traceback" not in out and r.returncode == 0, out.decode(errors="replace")
    for raw in (b"\x1b", b"\r", b"\x07", "\u009b".encode()):
        assert raw not in out, (raw, out.decode(errors="replace"))
    text = out.decode()
    assert "[paint-0] \\x1b[32msimulation passed\\x1b[0m" in text, text
    assert "progress 10%\\x0dprogress 100%" in text and "\\x9b2J cleared\\x07" in text, text  # (rich expands the tab)
    [pod] = json.loads(report.read_text())["workloads"][0]["attempts"][0]["pods"]
    assert pod["stderr_tail"] == ["\\x1b]0;title\\x07\\x1b[32mfake\\x1b[0m"], pod["stderr_tail"]
    html = page.read_bytes()
    assert b"\x1b" not in html and b"\r" not in html and b"\\x1b[32msimulation passed" in html
