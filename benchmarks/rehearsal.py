"""Benchmark: the example training program in the simulator (2 processes x 2 devices), and how long a
crashed host costs: from `--kill` to the resumed attempt's first training step.

The JobSet is tests/manifests/jobset_checkpoint_rehearsal.yaml (jaxinfra/templates/train on a shared
PersistentVolumeClaim); times are read off the CLI's own output as it arrives.

    python benchmarks/rehearsal.py [--runs 3]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "tests" / "manifests" / "jobset_checkpoint_rehearsal.yaml"
RANK0 = "[rehearsal-workers-0-0]"


def manifest(folder: Path, steps: int, pace: float) -> Path:
    """The rehearsal JobSet with `steps` steps paced at `pace` seconds, 2 CPU devices per pod."""
    text = re.sub(r'TRAIN_STEPS, value: "\d+"', f'TRAIN_STEPS, value: "{steps}"', MANIFEST.read_text())
    text = re.sub(r'TRAIN_MIN_STEP_SECONDS, value: "[\d.]+"', f'TRAIN_MIN_STEP_SECONDS, value: "{pace}"', text)
    path = folder / "rehearsal.yaml"
    path.write_text(
        text.replace(
            "- {name: JAX_NUM_PROCESSES",
            '- {name: JAX_NUM_CPU_DEVICES, value: "2"}\n              - {name: JAX_NUM_PROCESSES',
        )
    )
    return path


def timed_lines(*args: str) -> list[tuple[float, str]]:
    """Run `jaxinfra simulate ARGS` and stamp each output line with when it arrived."""
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jaxinfra", "simulate", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    lines = [(time.monotonic() - start, line.rstrip("\n")) for line in proc.stdout]  # type: ignore[union-attr]
    if proc.wait() != 0:
        raise SystemExit("\n".join(line for _, line in lines[-20:]))
    return lines


def steps_per_second(folder: Path) -> float:
    lines = timed_lines(str(manifest(folder, 200, 0.0)), "--run-command")
    rate = next(line for _, line in lines if line.startswith(f"{RANK0} finished at step"))
    return float(re.search(r": ([\d.]+) steps/s", rate).group(1))


def kill_to_first_resumed_step(folder: Path) -> tuple[float, int]:
    lines = timed_lines(str(manifest(folder, 80, 0.1)), "--run-command", "--kill", "1@9")
    killed = next(t for t, line in lines if line.startswith("[rehearsal-workers-0-1] failed: killed by SIGKILL"))
    resumed_at = next(i for i, (_, line) in enumerate(lines) if line.startswith(f"{RANK0} resumed from step"))
    first = next(t for t, line in lines[resumed_at:] if line.startswith(f"{RANK0} step "))
    return first - killed, int(lines[resumed_at][1].split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rates, gaps = [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            rates.append(steps_per_second(Path(tmp)))
        with tempfile.TemporaryDirectory() as tmp:
            gap, resumed = kill_to_first_resumed_step(Path(tmp))
            gaps.append(gap)
    print(
        f"jaxinfra/templates/train in the simulator, 2 processes x 2 devices, medians of {args.runs}: "
        f"{statistics.median(rates):.1f} steps/s (range {min(rates):.1f}-{max(rates):.1f})"
    )
    print(
        f"--kill to the resumed attempt's first step: {statistics.median(gaps):.2f} s "
        f"(range {min(gaps):.2f}-{max(gaps):.2f}; last run resumed from step {resumed})"
    )


if __name__ == "__main__":
    main()
