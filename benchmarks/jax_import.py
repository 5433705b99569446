"""What every JAX process a simulation starts pays before its first line: `import jax`, against `import numpy` (the
floor any array program pays) in the same run, and ml_dtypes' share of it (the pin in pyproject.toml's `sim` extra:
0.7.0 spent about a second registering ufunc loops).

    .venv/bin/python benchmarks/jax_import.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from importlib import metadata

IMPORTS = {"numpy (baseline)": "import numpy", "ml_dtypes": "import ml_dtypes", "jax": "import jax"}


def once(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    times: dict[str, list[float]] = {name: [] for name in IMPORTS}
    for _ in range(runs):  # interleaved: the VM's drift hits every row alike
        for name, code in IMPORTS.items():
            times[name].append(once(code))
    base = statistics.median(times["numpy (baseline)"])
    print(f"ml_dtypes {metadata.version('ml_dtypes')}, jax {metadata.version('jax')}; medians of {runs}, wall")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:18} {median:6.2f} s  {median / base:5.1f}x numpy  (min {min(values):.2f}, max {max(values):.2f})")


if __name__ == "__main__":
    main()
