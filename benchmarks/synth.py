"""Benchmark: `jaxinfra synth` of a 6,144-host job against Python's own start-up, in one run.

Targets (issue #2): CLI time <= 2x `python -c "import pydantic, yaml"`; YAML of the
6,144-host job <= 1.5x the size of a 2-host job's (no per-host objects). Prints a table and
the ratios; timings are medians of interleaved runs, so machine load hits every command alike.

    python benchmarks/synth.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HUGE = HERE / "stacks" / "v5p_16x16x24_x4.py"
SMALL = HERE / "stacks" / "v5p_2x2x2.py"


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        commands = {
            "python -c 'import pydantic, yaml'": [py, "-c", "import pydantic, yaml"],
            "floor: minimal typer+pydantic CLI": [py, str(HERE / "floor_cli.py"), "synth", "x"],
            "jaxinfra synth (6,144 hosts)": [py, "-m", "jaxinfra", "synth", str(HUGE), "-o", str(out / "huge")],
            "jaxinfra synth (2 hosts)": [py, "-m", "jaxinfra", "synth", str(SMALL), "-o", str(out / "small")],
        }
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for cmd in commands.values():  # warm the file cache and bytecode once
            timed(cmd)
        for _ in range(runs):
            for name, cmd in commands.items():
                samples[name].append(timed(cmd))
        huge_bytes = (out / "huge" / "v5p-huge.yaml").stat().st_size
        small_bytes = (out / "small" / "v5p-small.yaml").stat().st_size
    median = {name: statistics.median(s) for name, s in samples.items()}
    base, floor, huge, small = median.values()
    print(f"{'command':36} {'median':>9} {'min':>9}")
    for name, s in samples.items():
        print(f"{name:36} {median[name] * 1e3:7.1f}ms {min(s) * 1e3:7.1f}ms")
    print(f"ratio synth(6,144 hosts) / import pydantic, yaml: {huge / base:.2f}x (target <= 2.0x)")
    print(f"ratio floor (typer + pydantic CLI) / import:       {floor / base:.2f}x")
    print(f"ratio synth(6,144 hosts) / floor:                 {huge / floor:.2f}x")
    print(f"ratio synth(6,144 hosts) / synth(2 hosts):        {huge / small:.2f}x")
    print(
        f"YAML bytes: 6,144 hosts {huge_bytes}, 2 hosts {small_bytes}, "
        f"ratio {huge_bytes / small_bytes:.3f}x (target <= 1.5x)"
    )


if __name__ == "__main__":
    main()
