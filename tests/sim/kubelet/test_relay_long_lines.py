"""A container's long output lines, as containerd's CRI logger writes them (simulate/jaxinfra_sim/kubelet/relay.py):
a line longer than 16 KiB is cut into entries of 16 KiB (the last one what is left), whatever its length, at a cost
that grows with it linearly, holding no more than one entry per stream; a line of exactly 16 KiB stays one entry. The
relay is fed through a pipe here, in pieces as a flooding pod's output comes; then a pod of a simulation writes such a
line, and one is stopped by SIGTERM while it floods."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jaxinfra.yamlio import dump
from jaxinfra_sim.core.podrun import Process
from jaxinfra_sim.kubelet.relay import MAX_LOG_LINE, Relay
from tests.support.cli import simulate_cli
from tests.support.jobsets import indexed_job
from tests.support.paths import ROOT

pytestmark = pytest.mark.unit

ALPHABET = bytes(range(ord("a"), ord("z") + 1))


class Fed:
    """A relay watching one pipe of a process, as `stream`: what is written there, and what it said (`entries`)."""

    def __init__(self, stream: str = "stdout") -> None:
        self.entries: list[str] = []
        self.relay = Relay(lambda event, payload: self.entries.append(payload[2]), lambda run, phase: None)
        self.p = Process()
        self.read_end, self.write_end = os.pipe()
        self.relay.watch(self.p, self.read_end, stream)
        self.held = 0  # the most the relay held for the stream between reads

    def write(self, data: bytes, piece: int = 50_000) -> None:
        """`data` in pieces smaller than the pipe, each read before the next is written."""
        for at in range(0, len(data), piece):
            os.write(self.write_end, data[at : at + piece])
            while self.relay.read(self.p, self.read_end):
                self.held = max(self.held, len(self.p.buffers.get(self.read_end, b"")))

    def end(self) -> None:
        os.close(self.write_end)
        self.write_end = -1
        self.relay.drain(self.p)
        assert self.p.fds == {}, "its EOF closed the pipe"

    def close(self) -> None:
        for fd in list(self.p.fds):
            self.relay.close(self.p, fd)
        if self.write_end >= 0:
            os.close(self.write_end)
        self.relay.selector.close()


@pytest.fixture
def fed() -> Iterator[Fed]:
    f = Fed()
    yield f
    f.close()


@pytest.fixture
def status() -> Iterator[Fed]:
    f = Fed("status")
    yield f
    f.close()


def test_a_50_mib_line_without_a_newline_is_cut_into_16_kib_entries_holding_one_at_most(fed: Fed) -> None:
    size = 50 * 2**20 + 123
    line = (ALPHABET * (size // len(ALPHABET) + 1))[:size]
    fed.write(line)
    assert len(fed.entries) == size // MAX_LOG_LINE, "every whole 16 KiB so far, before the line ends"
    assert 0 < fed.held <= MAX_LOG_LINE
    fed.end()
    assert len(fed.entries) == math.ceil(size / MAX_LOG_LINE)
    assert all(len(e) == MAX_LOG_LINE for e in fed.entries[:-1]) and fed.entries[-1] == line[-123:].decode()
    assert "".join(fed.entries).encode() == line
    assert fed.p.logged == size


def test_short_lines_and_empty_ones_come_through_whole(fed: Fed) -> None:
    fed.write(b"step 1 loss=2.5\n\nstep 2 loss=1.9\tok\nlast")
    fed.end()
    assert fed.entries == ["step 1 loss=2.5", "", "step 2 loss=1.9\tok", "last"]


@pytest.mark.parametrize("pieces", [1, 2], ids=["at-once", "newline-after"])
def test_a_line_of_exactly_16_kib_is_one_entry_and_one_byte_more_is_two(fed: Fed, pieces: int) -> None:
    """Written at once, or its newline after the relay holds the whole 16 KiB: containerd cuts only a longer line."""
    exact, longer = b"x" * MAX_LOG_LINE, b"y" * (MAX_LOG_LINE + 1)
    for line in (exact, longer):
        if pieces == 1:
            fed.write(line + b"\n")
        else:
            fed.write(line)
            fed.write(b"\n")
    fed.write(b"after\n")
    fed.end()
    assert fed.entries == [exact.decode(), "y" * MAX_LOG_LINE, "y", "after"]


def test_status_lines_are_never_cut(status: Fed) -> None:
    """What the container reports of itself (one JSON object a line, read whole) is the simulator's own, not logs."""
    status.write(b'{"phase": "running", "pad": "' + b"z" * (3 * MAX_LOG_LINE) + b'"}\n', piece=10_000)
    status.end()
    assert status.entries == [] and status.p.running


# --- in a simulation --------------------------------------------------------------------------------------------


def flood(tmp_path: Path, script: str) -> Path:
    """An Indexed Job of one busybox pod running `sh -c script`, written to `tmp_path`."""
    pod = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", script]}],
    }
    manifest = tmp_path / "job.yaml"
    manifest.write_text(dump([indexed_job("flood", pod, 1, backoffLimit=0)]))
    return manifest


@pytest.mark.simulator
def test_a_pod_writing_64_mib_without_a_newline_succeeds_its_output_in_16_kib_entries(tmp_path: Path) -> None:
    """Held whole, the line cost a simulation the square of its length: 64 MiB took half a minute, past --timeout."""
    size = 64 * 2**20 + 5
    manifest = flood(tmp_path, f"head -c {size} /dev/zero | tr '\\0' a >&2")
    rc, report, out = simulate_cli(str(manifest), "--run-command", "--timeout", "20", tmp=tmp_path)
    [workload] = report["workloads"]
    [pod] = workload["attempts"][0]["pods"]
    assert rc == 0 and workload["verdict"] == "succeeded", out
    *whole, last = pod["stderr_tail"]  # the last entries, as the report keeps them
    assert whole and whole == ["a" * MAX_LOG_LINE] * len(whole) and last == "aaaaa"


@pytest.mark.simulator
def test_a_simulation_stops_at_sigterm_while_a_pod_floods_one_line(tmp_path: Path) -> None:
    """Its logs printed as they come, the pod writing a line of 1 GiB: the SIGTERM ends it within seconds, every pod
    process reaped, nothing of it left in its TMPDIR."""
    marker = 2**30 + 7  # the pod's `head -c` size: its processes found by it
    manifest = flood(tmp_path, f"head -c {marker} /dev/zero | tr '\\0' a")
    scratch, out = tmp_path / "tmp", tmp_path / "out.txt"
    scratch.mkdir()
    with out.open("wb") as sink:
        sim = subprocess.Popen(
            [sys.executable, "-m", "jaxinfra", "simulate", str(manifest), "--run-command", "--timeout", "60"],
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "TMPDIR": str(scratch)},
        )
        try:
            printed = until(lambda: out.stat().st_size > 4 * MAX_LOG_LINE, 20)
            assert printed, "entries come while the line is still being written: " + out.read_text()[-2000:]
            sim.send_signal(signal.SIGTERM)
            rc = sim.wait(timeout=15)
        finally:
            sim.kill()
            sim.wait()
    text = out.read_text()
    assert rc == 128 + signal.SIGTERM and "Traceback" not in text, text[-2000:]
    logged = [line for line in text.splitlines() if line.startswith("[flood-0] a")]
    assert logged and all(len(line) <= len("[flood-0] ") + MAX_LOG_LINE for line in logged)
    assert until(lambda: not running(str(marker)), 5), "a pod process outlived the simulation"
    assert list(scratch.iterdir()) == []


def until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def running(marker: str) -> bool:
    """Whether a process of this machine has `marker` in its command line."""
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker.encode() in (proc / "cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False
