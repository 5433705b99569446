"""Benchmark: the example training program (jaxinfra/templates/train) as 2 processes x 2 CPU devices, launched
as its tests launch it (each process with jaxinfra's env contract of its rank), against 1 process x
4 devices in the same run; with and without checkpoints.

Steps per second are the program's own figure: from the end of its first step (compile excluded) to
its last. Wall is the whole run: interpreter start, imports, distributed init, compile, steps, saves,
shutdown.

    python benchmarks/train.py [--runs N] [--steps N]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout: tests.support is a package there
from tests.support.train_group import Group  # noqa: E402  (launches jaxinfra/templates/train with a rank's env contract)

RATE = re.compile(r"^finished at step \d+: ([\d.]+) steps/s", re.M)


def run(processes: int, devices: int, steps: int, checkpoint_every: int | None) -> tuple[float, float]:
    """(steps per second, wall seconds) of one run."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {"TRAIN_STEPS": str(steps)}
        if checkpoint_every:
            env |= {"JAXINFRA_CHECKPOINT_DIR": f"{tmp}/ckpt", "TRAIN_CHECKPOINT_EVERY": str(checkpoint_every)}
        start = time.perf_counter()
        with Group(Path(tmp) / "logs", processes, devices, env=env) as g:
            codes = g.wait(timeout=600)
            wall = time.perf_counter() - start
            if codes != [0] * processes:
                raise SystemExit(f"run failed {codes}:\n{g.output()}")
            return float(RATE.search(g.output()).group(1)), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    cases = [
        ("2 x 2", 2, 2, None),
        ("1 x 4", 1, 4, None),
        ("2 x 2, checkpoint every 10", 2, 2, 10),
        ("2 x 2, checkpoint every 100", 2, 2, 100),
    ]
    results: dict[str, list[tuple[float, float]]] = {name: [] for name, *_ in cases}
    for _ in range(args.runs):  # interleaved, so a busy moment of the machine hits every case alike
        for name, processes, devices, every in cases:
            results[name].append(run(processes, devices, args.steps, every))
    medians = {
        name: (statistics.median(r for r, _ in rs), statistics.median(w for _, w in rs)) for name, rs in results.items()
    }
    print(f"jaxinfra/templates/train, {args.steps} steps, median of {args.runs} runs (CPU devices)")
    for name, (rate, wall) in medians.items():
        print(f"  {name:<30} {rate:8.1f} steps/s   wall {wall:5.2f} s")
    print(f"  2 x 2 / 1 x 4 steps/s: {medians['2 x 2'][0] / medians['1 x 4'][0]:.2f}")


if __name__ == "__main__":
    main()
