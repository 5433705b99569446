"""Benchmark: `npx cdk8s synth` (every stack, through jaxinfra.cdk8s) against `jaxinfra synth stacks`, in one run.

Both write one YAML file per stack; the objects are equal (tests/test_cdk8s.py). The
difference is the cost of the cdk8s CLI (Node) plus the app (Python + jsii starting Node
again). Timings are medians of interleaved runs; needs `npm ci` first.

    python benchmarks/cdk8s.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The checkout: its stacks, cdk8s.yaml and pinned cdk8s CLI.
ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    npx = shutil.which("npx")
    if npx is None or not (ROOT / "node_modules" / ".bin" / "cdk8s").exists():
        sys.exit("needs Node and `npm ci` at the checkout's root (its node_modules/.bin/cdk8s)")
    env = {**os.environ, "CDK8S_CHECK_UPGRADE": "false", "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    with tempfile.TemporaryDirectory() as tmp:
        commands = {
            "npx cdk8s synth (all stacks)": [npx, "cdk8s", "synth", "--output", f"{tmp}/cdk8s"],
            "jaxinfra synth stacks -o DIR": [
                sys.executable,
                "-m",
                "jaxinfra",
                "synth",
                "stacks",
                "-o",
                f"{tmp}/jaxinfra",
            ],
        }
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for cmd in commands.values():  # warm the file cache and bytecode once
            timed(cmd, env)
        for _ in range(runs):
            for name, cmd in commands.items():
                samples[name].append(timed(cmd, env))
    median = {name: statistics.median(s) for name, s in samples.items()}
    print(f"{'command':32} {'median':>9} {'min':>9}   ({runs} runs each, interleaved)")
    for name, s in samples.items():
        print(f"{name:32} {median[name] * 1e3:7.0f}ms {min(s) * 1e3:7.0f}ms")
    cdk8s, jaxinfra = median.values()
    print(f"ratio cdk8s synth / jaxinfra synth: {cdk8s / jaxinfra:.1f}x")


if __name__ == "__main__":
    main()
