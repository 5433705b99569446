"""`jaxinfra doctor` and the check `jaxinfra simulate` makes before anything starts, on this machine: every part found
(.ci/run installs them), and, with parts hidden in a mount namespace of the test's own (the CNI plugins' folders under
an empty tmpfs, `nft` and `runc` under /dev/null: nothing of the machine changes), every missing one named at once
with the one command that installs them all, exit 3, nothing started."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from jaxinfra_sim.core.programs import find
from jaxinfra_sim.network.netns_workers import CNI_DIRS
from jaxinfra_sim.node import parts
from tests.support import unprivileged
from tests.support.paths import ROOT

pytestmark = pytest.mark.simulator

JAXINFRA = [sys.executable, "-m", "jaxinfra"]
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="hiding the machine's programs takes a mount namespace (root)")


def hidden(argv: list[str], tmp: Path, *programs: str) -> subprocess.CompletedProcess[str]:
    """`argv` run where the CNI plugins and `programs` are not installed: a private mount namespace (unshare -m) with
    an empty tmpfs over each CNI folder and /dev/null over each program."""
    steps = [f"mount -t tmpfs tmpfs {d}" for d in CNI_DIRS if os.path.isdir(d)]
    steps += [f"mount --bind /dev/null {p}" for name in programs if (p := find(name))]
    script = " && ".join([*steps, "exec " + shlex.join(argv)])
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=180,
        env={**os.environ, "TMPDIR": str(tmp)},
    )


def test_doctor_finds_every_part_here_with_where_and_version(tmp_path: Path) -> None:
    r = subprocess.run([*JAXINFRA, "doctor", "--all"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {line.split("  ")[0]: line for line in r.stdout.splitlines()[1:] if not line.startswith("warning:")}
    assert set(rows) == {p.name for p in parts.PARTS}
    assert "/usr/sbin/nft" in rows["nft"] and "nftables v" in rows["nft"]
    assert any(d in rows["CNI plugins"] for d in CNI_DIRS)
    assert r.stderr.startswith("jaxinfra: every part these simulations need is here")
    j = subprocess.run([*JAXINFRA, "doctor", "--all", "--json"], capture_output=True, text=True, timeout=60)
    data = json.loads(j.stdout)
    assert j.returncode == 0 and data["ready"] is True and data["problem"] is None
    assert {p["part"]: p["status"] for p in data["parts"]}["ip"] == "ok"


@as_root
def test_simulate_names_every_missing_part_at_once_before_anything_starts(tmp_path: Path) -> None:
    r = hidden([*JAXINFRA, "simulate", "stacks/cpu_dev.py", "--run-command"], tmp_path, "nft", "runc")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.splitlines()[-1] == (
        "jaxinfra: cannot simulate here: missing the CNI plugins ptp and static (they wire each pod's network "
        "namespace, as containerd's CRI does), `nft` (it loads NetworkPolicy's and kube-proxy's rules), `runc` "
        "(--run-command runs each container under it); fix: apt-get update && apt-get install -y "
        "containernetworking-plugins nftables runc"
    )
    assert list(tmp_path.iterdir()) == []  # nothing made: no pod, no scratch folder


@as_root
def test_doctor_shows_the_missing_parts_and_what_installs_them(tmp_path: Path) -> None:
    r = hidden([*JAXINFRA, "doctor", "--json"], tmp_path, "nft")
    assert r.returncode == 3
    data = json.loads(r.stdout)
    status = {p["part"]: p["status"] for p in data["parts"]}
    assert status["CNI plugins"] == status["nft"] == "missing" and status["ip"] == "ok"
    assert data["install"].endswith("apt-get install -y containernetworking-plugins nftables")
    assert r.stderr.splitlines()[-1] == f"jaxinfra: {data['problem']}"


def test_a_machine_without_namespaces_is_named_by_doctor_too(tmp_path: Path) -> None:
    """As an unprivileged user under a seccomp filter that refuses unshare(2), as Docker's default profile does."""
    home = unprivileged.scratch_home()
    try:
        r = unprivileged.run(
            [*JAXINFRA, "doctor"], home, deny_unshare=True, capture_output=True, text=True, cwd=ROOT, timeout=60
        )
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)
    assert r.returncode == 3, r.stdout + r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("user namespaces"))
    assert "missing" in row and "a seccomp filter forbids new namespaces" in row
    assert r.stderr.splitlines()[-1].startswith(
        "jaxinfra: cannot simulate here: a seccomp filter forbids new namespaces"
    )
