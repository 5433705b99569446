"""Benchmark: the simulator's cost as the process count grows, against a naive launch, in one run.

For N = 8 ... 256 processes x 1 CPU device (a hand-written Indexed Job and its headless Service, the built-in
probe; 512 and 1,024 on request), the v5p 4x4x8 slice (32 x 4 devices) and 8 x 2: the wall of `jaxinfra simulate` as
a user runs it, the simulation's peak memory (all pods: the machine's MemAvailable drop) and a pod's (its proportional
set size), and N fresh interpreters running the same probe where that is feasible (N <= 16). A size this machine
cannot hold is the simulator's own refusal (exit 3, its figures), printed as such. Beside each job up to 512
processes, JAX's own floor (benchmarks/floor.py: the same probe forked N times from one warm parent, with no pod,
sandbox or network around it), so the curve separates what the simulator adds from what JAX itself costs as N grows,
and each target from what JAX alone takes here. Targets (issue #43), as ratios in one run: 256 vs 64 processes <=
4.5x (linear: 4x); 1,024 vs 256 <= 4.5x, within this machine's memory; v5p 4x4x8 <= 0.6x the naive 8-process launch;
8 x 2 <= 0.25x it.

    python benchmarks/scale.py [--sizes 8,16,32,64,128,256[,512,1024]] [--runs 1] [--steps] [--json FILE]

`--steps` adds where each size's time went: per step of the probe (`probe.Stopwatch`: join, device exchange, arrays,
program compiled or loaded, collectives, verification, shutdown barrier), the median wall and CPU seconds of a process
other than 0, process 0's, and the sum of CPU over all processes.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from simulate import PY, cli, compile_package, naive  # noqa: E402  (benchmarks/simulate.py: one CLI runner, one naive launch)

MIB = 2**20
NAIVE_UP_TO = 16
FLOOR_UP_TO = 512
"""Sizes that also run JAX's own floor (benchmarks/floor.py: the same probe forked N times, nothing around it); past
512 its N processes alone would take most of this machine's memory; a size the simulator refused runs no floor."""
FLOOR_TIMEOUT_S = 900
STEPS = ("connect", "devices", "arrays", "program", "collectives", "verify", "shutdown")
"""The probe's steps (`probe.Stopwatch` laps in `probe.run_probe`), in the order they run."""

INDEXED_JOB = """\
apiVersion: v1
kind: Service
metadata:
  name: workers
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector:
    job-name: scale
---
apiVersion: batch/v1
kind: Job
metadata:
  name: scale
spec:
  completionMode: Indexed
  completions: {n}
  parallelism: {n}
  backoffLimit: 0
  template:
    spec:
      subdomain: workers
      restartPolicy: Never
      containers:
      - name: jax
        image: python:3.11
        command: ["python", "train.py"]
        env:
        - name: JAX_COORDINATOR_ADDRESS
          value: scale-0.workers:1234
        - name: JAX_NUM_PROCESSES
          value: "{n}"
        - name: JAX_PROCESS_ID
          valueFrom:
            fieldRef:
              fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']
"""


def measure(target: str) -> dict:
    """One simulation: its wall, verdict and memory (peak of the whole simulation; a pod's, the median of those
    sampled)."""
    wall, report = cli(target)
    if "refused" in report:
        return {"wall": wall, "ok": False, "refused": report["refused"]}
    attempt = report["workloads"][0]["attempts"][-1]
    sampled = [p["memory_pss_peak"] for p in attempt["pods"] if p["memory_pss_peak"]]
    return {
        "wall": wall,
        "ok": report["ok"],
        "pods": len(attempt["pods"]),
        "memory_peak": attempt["memory_peak"],
        "pod_pss": statistics.median(sampled) if sampled else None,
        "steps": [p.get("probe_timings", {}).get("steps", {}) for p in attempt["pods"]],
    }


def floor(n: int, devices: int = 1) -> float:
    """The wall of benchmarks/floor.py for n processes of `devices` each, its interpreter and JAX's import included
    as in `cli`."""
    start = time.perf_counter()
    argv = [PY, str(HERE / "floor.py"), str(n), str(devices)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=FLOOR_TIMEOUT_S)
    wall = time.perf_counter() - start
    lines = done.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if done.returncode == 0 and lines else {}
    if result.get("passed") != n:
        raise SystemExit(f"JAX's floor for {n} processes failed: {done.stderr.strip()[-500:] or result}")
    return wall


def print_steps(rows: dict[str, dict]) -> None:
    """Per size, per probe step: a median process's wall and CPU (process 0 aside), process 0's, all processes' CPU."""
    print("where the time went (per probe step: median of processes 1..N-1 wall / CPU s, process 0's, CPU of all):")
    for name, r in rows.items():
        steps = r.get("steps") or []
        if len(steps) < 2 or not steps[0]:
            continue
        print(f"  {name}")
        for step in (s for s in STEPS if s in steps[0]):
            others = [s[step] for s in steps[1:] if step in s]
            wall, cpu = (statistics.median(o[k] for o in others) for k in ("wall", "cpu"))
            total = sum(s[step]["cpu"] for s in steps if step in s)
            zero = steps[0][step]
            print(
                f"    {step:<12} {wall:7.3f} / {cpu:6.3f}   process 0 {zero['wall']:7.3f} / {zero['cpu']:6.3f}"
                f"   all {total:7.2f} s CPU"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,16,32,64,128,256")
    parser.add_argument("--runs", type=int, default=1, help="runs per size (medians)")
    parser.add_argument("--steps", action="store_true", help="where the time went, per probe step")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    compile_package()
    folder = Path(tempfile.mkdtemp(prefix="jaxinfra-scale-"))
    rows: dict[str, dict] = {}
    try:
        for n in sizes:
            (folder / f"{n}.yaml").write_text(INDEXED_JOB.format(n=n))
        targets = {f"{n} x 1": str(folder / f"{n}.yaml") for n in sizes}
        targets["8 x 2"] = str(HERE / "stacks" / "cpu_8x2.py")
        targets["v5p 4x4x8 (32 x 4)"] = str(HERE / "stacks" / "v5p_4x4x8.py")
        for name, target in targets.items():
            runs = [measure(target) for _ in range(args.runs)]
            rows[name] = {
                **runs[0],
                "wall": statistics.median(r["wall"] for r in runs),
                "ok": all(r["ok"] for r in runs),
            }
            n, devices = (int(k) for k in re.findall(r"(\d+) x (\d+)", name)[-1])
            if n <= NAIVE_UP_TO and devices == 1:
                rows[name]["naive"] = statistics.median(naive(n, 1) for _ in range(args.runs))
            if n <= FLOOR_UP_TO and "refused" not in rows[name]:
                rows[name]["floor"] = statistics.median(floor(n, devices) for _ in range(args.runs))
        rows["naive 8 x 2"] = {"wall": statistics.median(naive(8, 2) for _ in range(args.runs))}
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    print(
        f"{'job':<20} {'verdict':>8} {'wall s':>8} {'ms/proc':>8} {'peak MiB':>9} {'MiB/pod':>8} {'naive s':>8}"
        f" {'floor s':>8}"
    )
    for name, r in rows.items():
        if "refused" in r:
            print(f"{name:<20} {'refused':>8}  {r['refused']}")
            continue
        if "pods" not in r:
            continue
        per_pod = r["memory_peak"] / r["pods"] / MIB
        naive_s, floor_s = (f"{r[k]:.2f}" if k in r else "" for k in ("naive", "floor"))
        print(
            f"{name:<20} {'passed' if r['ok'] else 'FAILED':>8} {r['wall']:>8.2f} {r['wall'] / r['pods'] * 1000:>8.1f} "
            f"{r['memory_peak'] / MIB:>9.0f} {per_pod:>8.1f} {naive_s:>8} {floor_s:>8}"
        )
    base = rows["naive 8 x 2"]["wall"]
    print(f"naive launch of 8 interpreters x 2 devices: {base:.2f} s")
    width = 40
    ran = {name: r for name, r in rows.items() if name.endswith("x 1") and "pods" in r}
    longest = max(r["wall"] for r in ran.values())
    print("curve (wall per size, x 1 device):")
    for name, r in ran.items():
        print(f"  {name:>8} {'#' * max(1, round(r['wall'] / longest * width)):<{width}} {r['wall']:.2f} s")
    floors = {name: r["floor"] for name, r in ran.items() if "floor" in r}
    if floors:
        print("simulator over JAX's own floor (the same probe forked N times, nothing around it):")
        for name, f in floors.items():
            print(f"  {name:>8} {ran[name]['wall']:.2f} s against {f:.2f} s: {ran[name]['wall'] / f:.2f}x")
    ratios = []
    for big, small in [(256, 64), (1024, 256)]:
        if f"{big} x 1" in ran and f"{small} x 1" in ran:
            ratios.append((f"{big} vs {small} processes", ran[f"{big} x 1"]["wall"] / ran[f"{small} x 1"]["wall"], 4.5))
            if f"{big} x 1" in floors and f"{small} x 1" in floors:
                ratio = floors[f"{big} x 1"] / floors[f"{small} x 1"]
                print(f"  JAX's floor, {big} vs {small} processes: {ratio:.2f}x (for comparison; no target)")
        elif f"{big} x 1" in rows:
            print(f"  {big} vs {small} processes: not measured ({big} processes refused or failed)  MISSED")
    for name, short in (("v5p 4x4x8 (32 x 4)", "v5p 4x4x8"), ("8 x 2", "8 x 2")):
        if "floor" in rows[name]:
            print(f"  JAX's floor, {short} vs naive 8: {rows[name]['floor'] / base:.2f}x (for comparison; no target)")
    ratios.append(("v5p 4x4x8 vs naive 8", rows["v5p 4x4x8 (32 x 4)"]["wall"] / base, 0.6))
    ratios.append(("8 x 2 vs naive 8", rows["8 x 2"]["wall"] / base, 0.25))
    for what, ratio, target in ratios:
        print(f"  {what}: {ratio:.2f}x (target <= {target}x){'' if ratio <= target else '  MISSED'}")
    if args.steps:
        print_steps(rows)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "ratios": ratios}, indent=2) + "\n")


if __name__ == "__main__":
    main()
