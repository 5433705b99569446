"""Benchmark: the simulator against a naive launch of the same processes, in one run.

Targets, on this machine: simulating an 8-process x 2-device job with the built-in probe
<= 0.3x a naive subprocess launch of 8 fresh interpreters running the same probe, and <= 1.5 s
wall, as root and as an unprivileged user alike (run as root, it measures both, interleaved; the
two walls within 10 %); an injected crash to the final verdict <= 2 s; a 32-host x 4-chip v5p
4x4x8 slice (128 devices) passes the full probe in <= 15 s.

    python benchmarks/simulate.py [--runs N] [--skip-scale]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable
sys.path.insert(0, str(HERE.parent))  # the checkout: tests.support is a package there
from tests.support.unprivileged import command, scratch_home  # noqa: E402  (runs a command as uid 65534 when this is root)


def cli(*args: str, unprivileged: bool = False) -> tuple[float, dict]:
    """Wall time of one `jaxinfra simulate` and its JSON report; `unprivileged`: as uid 65534 when this is root."""
    home = scratch_home()
    try:
        report = home / "r.json"
        argv = [PY, "-m", "jaxinfra", "simulate", *args, "--no-logs", "--json", str(report)]
        argv, env, save = command(argv, home) if unprivileged else (argv, None, None)
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - start
        if save is not None:
            shutil.rmtree(save, ignore_errors=True)
        if not report.exists():  # refused before anything started (this machine's capacity: exit 3)
            return wall, {"ok": False, "refused": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
        return wall, json.loads(report.read_text())
    finally:
        shutil.rmtree(home, ignore_errors=True)


def naive(n: int, devices: int) -> float:
    """n fresh interpreters, each running the same probe: what a plain launcher would do."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                PY,
                "-m",
                "jaxinfra_sim.jax.probe",
                "--expected-rank",
                str(i),
                "--num-processes",
                str(n),
                "--devices",
                str(devices),
                "--hosts",
                str(n),
            ],
            env={
                **os.environ,
                "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
                "JAX_NUM_PROCESSES": str(n),
                "JAX_PROCESS_ID": str(i),
                "JAX_PLATFORMS": "cpu",
            },
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in range(n)
    ]
    codes = [p.wait(timeout=300) for p in procs]
    wall = time.perf_counter() - start
    if any(codes):
        raise SystemExit(f"naive launch failed: {codes}")
    return wall


def compile_package() -> None:
    """Byte-compile jaxinfra as `pip install` does for a wheel: an editable install under
    PYTHONDONTWRITEBYTECODE (set on some CI machines) would otherwise compile every module
    from source on every run, and that would be measured as the simulator's start-up."""
    for name in ("jaxinfra", "jaxinfra_sim"):
        for folder in importlib.util.find_spec(name).submodule_search_locations:
            compileall.compile_dir(folder, maxlevels=0, quiet=1)


def report_sizes() -> str:
    """The default stack's `--html` page and `--trace` file, as a user writes them (logs on)."""
    home = scratch_home()
    try:
        page, trace = home / "report.html", home / "trace.json"
        subprocess.run(
            [
                PY,
                "-m",
                "jaxinfra",
                "simulate",
                str(HERE.parent / "stacks" / "cpu_dev.py"),
                "--html",
                str(page),
                "--trace",
                str(trace),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        size = page.stat().st_size
        return (
            f"HTML report of the default stack: {size / 1000:.1f} KB (target < 200 KB); "
            f"its trace {trace.stat().st_size / 1000:.1f} KB"
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-scale", action="store_true")
    args = parser.parse_args()
    compile_package()
    stack = str(HERE / "stacks" / "cpu_8x2.py")
    sim, sim_inner, base, user, api = [], [], [], [], []
    root = os.geteuid() == 0
    for _ in range(args.runs):  # interleaved, so load on the machine hits all alike
        wall, report = cli(stack)
        assert report["ok"], report
        sim.append(wall)
        sim_inner.append(report["workloads"][0]["attempts"][-1]["seconds"])
        base.append(naive(8, 2))
        wall, report = cli(str(HERE / "stacks" / "cpu_8x2_api.py"))  # the same job, its pods mounting a token
        assert report["ok"] and report["api_server"], report
        api.append(wall)
        if root:  # the same, as most users run it: not root (pods isolate through user namespaces)
            wall, report = cli(stack, unprivileged=True)
            assert report["ok"], report
            user.append(wall)
    s, b, inner = statistics.median(sim), statistics.median(base), statistics.median(sim_inner)
    who = "as root" if root else f"as uid {os.geteuid()}"
    print(
        f"8 x 2 probe, medians of {args.runs}: jaxinfra simulate {who} {s:.2f} s (range {min(sim):.2f}-{max(sim):.2f}; "
        f"processes alone {inner:.2f} s), naive launch {b:.2f} s (range {min(base):.2f}-{max(base):.2f})"
    )
    print(f"  ratio simulate / naive: {s / b:.2f}x (target <= 0.3x); wall {s:.2f} s (target <= 1.5 s)")
    print(f"  at the issue's reference speed (naive launch 4.8 s on 2 cores) that wall is {s / b * 4.8:.2f} s")
    a = statistics.median(api)
    print(
        f"  with the API server (tokens mounted, kubernetes_api=True): {a:.2f} s "
        f"(range {min(api):.2f}-{max(api):.2f}), "
        f"{a - s:+.2f} s: what starting and serving it costs"
    )
    if user:
        u = statistics.median(user)
        print(
            f"  as uid 65534 (user namespaces): {u:.2f} s (range {min(user):.2f}-{max(user):.2f}), ratio {u / b:.2f}x; "
            f"{(u - s) / s:+.1%} vs root (target: within 10 %)"
        )

    _, report = cli(stack, "--kill", "3@0.2")
    attempt = report["workloads"][0]["attempts"][0]
    crashed = next(p for p in attempt["pods"] if p["signal"] == "SIGKILL" and p["reason"].startswith("killed"))
    print(
        f"crash to verdict: {attempt['seconds'] - crashed['timings']['failed']:.3f} s after the pod died "
        f"({attempt['seconds'] - crashed['timings']['started'] - 0.2:.3f} s after the kill; target <= 2 s)"
    )

    print(report_sizes())

    if not args.skip_scale:
        wall, report = cli(str(HERE / "stacks" / "v5p_4x4x8.py"))
        w = report["workloads"][0]
        checks = all(p["checks_passed"] for p in w["attempts"][-1]["pods"])
        print(
            f"scale v5p 4x4x8 (32 x 4 = 128 devices): {w['verdict']}, all checks {checks}, "
            f"{wall:.2f} s (target <= 15 s), "
            f"{wall / b:.1f}x the 8 x 2 naive launch"
        )


if __name__ == "__main__":
    main()
