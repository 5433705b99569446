"""Simulator stress: many simulations with random injected faults; verdicts, time bounds, no leaks.

Each run is `jaxinfra simulate` (the CLI, in a subprocess with its own empty TMPDIR) on a small
stack with one fault drawn at random (seeded: `--seed` reproduces the run): none, --fail POD,
--kill POD@t, --hang POD, --delay POD=t (within or past the init timeout), or the command itself
stopped at a random moment: Ctrl-C (SIGINT to its process group: exit 130) or SIGTERM to it alone
(`timeout`, a CI cancel: exit 143), within STOP_BOUND, without a traceback. The expected verdict
follows from the fault and the stack's restart policy (faults hit the first attempt only, so one
allowed restart recovers); the time to verdict is the faulty first attempt's duration minus the
fault's offset: a crash (fail, kill) must reach it within CRASH_BOUND, a hang or a start past the
init timeout within init timeout + 2 s. After each run and at the end: no process left (the
report's pids and process groups, and any process whose environment carries the run's own TMPDIR,
or whose command line names its report), no listening socket on the run's pod IPs or its API
server's address (/proc/net/tcp{,6}), and the run's TMPDIR empty.

    python benchmarks/stress.py [--runs 50] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
INIT_TIMEOUT = 3.0
RUN_TIMEOUT = 30.0
CRASH_BOUND = 2.0
HANG_BOUND = INIT_TIMEOUT + 2.0
STOP_BOUND = 3.0
STOPS = {"ctrl-c": (signal.SIGINT, True, 130), "sigterm": (signal.SIGTERM, False, 143)}
"""Stopping the command: (signal, to its whole process group, exit status)."""


@dataclass(frozen=True)
class Target:
    stack: str
    backend: str
    pods: int
    restarts: int  # whole-group restarts the manifests allow (JobSet maxRestarts; Job backoffLimit = restarts x pods)


TARGETS = (
    Target("benchmarks/stacks/cpu_dev_no_restart.py", "jobset", 2, 0),  # stacks/cpu_dev.py, restarting never
    Target("benchmarks/stacks/cpu_dev_no_restart.py", "job", 2, 0),
    Target("benchmarks/stacks/cpu_4x1.py", "jobset", 4, 1),
    Target("benchmarks/stacks/cpu_4x1.py", "job", 4, 1),
    Target("benchmarks/stacks/cpu_2x1_api.py", "jobset", 2, 1),  # a token mounted: the simulation's API server runs
)
KINDS = ("none", "fail", "kill", "hang", "delay-within", "delay-past", *STOPS)


def draw(rng: random.Random) -> tuple[Target, str, list[str], float]:
    """A target, a fault kind, its CLI options and the fault's offset (seconds after the pod starts)."""
    target = rng.choice(TARGETS)
    kind = rng.choice(KINDS)
    pod = str(rng.randrange(target.pods))
    if kind == "fail":
        return target, kind, ["--fail", pod], 0.0
    if kind == "kill":
        t = round(rng.uniform(0.0, 0.1), 2)
        return target, kind, ["--kill", f"{pod}@{t}"], t
    if kind == "hang":
        return target, kind, ["--hang", pod], 0.0
    if kind == "delay-within":
        return target, kind, ["--delay", f"{pod}={round(rng.uniform(0.2, 1.0), 2)}"], 0.0
    if kind == "delay-past":
        return target, kind, ["--delay", f"{pod}={round(INIT_TIMEOUT + rng.uniform(1.0, 2.0), 2)}"], 0.0
    if kind in STOPS:  # warming JAX, forking pods, running: seconds after the command starts (in its first ~0.05 s,
        # 0.1 s on a loaded machine, the interpreter itself is starting: Python's own KeyboardInterrupt traceback)
        return target, kind, [], round(rng.uniform(0.2, 1.2), 2)
    return target, kind, [], 0.0


def expected(target: Target, kind: str) -> tuple[str, int]:
    """(verdict, restarts): a fault that breaks the first attempt costs one restart, or fails the workload."""
    if kind in ("none", "delay-within", *STOPS):  # a stop that comes after the end changes nothing
        return "succeeded", 0
    return ("succeeded", 1) if target.restarts >= 1 else ("failed", 0)


# --- leak checks -----------------------------------------------------------------------------


def _proc_text(pid: str, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""


def leftover_processes(pids: set[int], markers: list[bytes]) -> list[str]:
    """Processes still alive that belong to a run: a reported pid or process group, or a marker in env/cmdline."""
    me = os.getpid()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        try:
            pgid = os.getpgid(pid)
        except OSError:
            continue
        stat = _proc_text(entry, "stat")
        if b") Z " in stat:  # a zombie holds nothing but its pid
            continue
        env, cmd = _proc_text(entry, "environ"), _proc_text(entry, "cmdline")
        if pid in pids or pgid in pids or any(m in env or m in cmd for m in markers):
            text = cmd.replace(b"\0", b" ").decode(errors="replace")[:80]
            out.append(f"{pid} {text}")
    return out


def _hex_ip(ip: str) -> str:
    return "".join(f"{int(b):02X}" for b in reversed(ip.split(".")))


def leftover_listeners(ips: set[str]) -> list[str]:
    """LISTEN sockets (state 0A) bound to one of the run's pod IPs (IPv4, or IPv4-mapped IPv6)."""
    wanted = {_hex_ip(ip): ip for ip in ips}
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            addr, port = local.split(":")
            if state == "0A" and addr[-8:] in wanted and (len(addr) == 8 or addr[:24] == "0000000000000000FFFF0000"):
                out.append(f"{wanted[addr[-8:]]}:{int(port, 16)}")
    return out


# --- one run -------------------------------------------------------------------------------


def run_one(i: int, rng: random.Random, work: Path) -> dict:
    target, kind, fault, offset = draw(rng)
    scratch, report = work / f"tmp-{i}", work / f"report-{i}.json"
    scratch.mkdir()
    args = [
        PY,
        "-m",
        "jaxinfra",
        "simulate",
        target.stack,
        "--backend",
        target.backend,
        *fault,
        "--init-timeout",
        str(INIT_TIMEOUT),
        "--timeout",
        str(RUN_TIMEOUT),
        "--no-logs",
        "--json",
        str(report),
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
        start_new_session=True,
    )
    if kind in STOPS:
        signum, group, _ = STOPS[kind]
        time.sleep(offset)
        (os.killpg if group else os.kill)(proc.pid, signum)
        stopped = time.perf_counter()
    _, stderr = proc.communicate(timeout=RUN_TIMEOUT + 30)
    wall = time.perf_counter() - start
    data = json.loads(report.read_text()) if report.exists() else {"workloads": []}
    [w] = data["workloads"] or [{"verdict": "no report", "restarts": -1, "attempts": []}]
    want = expected(target, kind)
    pods = [p for a in w["attempts"] for p in a["pods"]]
    pids = {p["pid"] for p in pods if p["pid"]}
    ips = {p["ip"] for p in pods} | {line.split("https://")[1].split(":")[0] for line in data.get("api_server", [])[:1]}
    # TMPDIR=<the run's own scratch> is in the environ of the CLI, the probe parent and every pod forked from it;
    # the report path is on the CLI's command line. (Pod IPs are not markers: other simulations may reuse them.)
    markers = [f"TMPDIR={scratch}".encode(), str(report).encode()]
    first = w["attempts"][0]["seconds"] if w["attempts"] else float("inf")
    to_verdict = max(first - offset, 0.0) if want != ("succeeded", 0) else None
    bound = CRASH_BOUND if kind in ("fail", "kill") else HANG_BOUND
    status = 0 if want[0] == "succeeded" else 1
    if kind in STOPS and not (proc.returncode == 0 and (w["verdict"], w["restarts"]) == want):  # else it ended first
        # whatever the simulation had reached: the command ends at once, saying nothing it should not
        want, status, bound = (w["verdict"], w["restarts"]), STOPS[kind][2], STOP_BOUND
        to_verdict = start + wall - stopped
    problems = []
    if (w["verdict"], w["restarts"]) != want:
        why = [
            f"attempt {a['index']}: {a['reason']}; "
            + ", ".join(
                f"rank {p['rank']} {p['phase']} {p['reason'] or ''}".strip()
                for p in a["pods"]
                if p["phase"] != "succeeded"
            )
            for a in w["attempts"]
        ]
        problems.append(
            f"verdict {w['verdict']}/{w['restarts']} restarts, expected {want[0]}/{want[1]} ({' | '.join(why)})"
        )
    if proc.returncode != status or "Traceback" in stderr:
        problems.append(f"exit status {proc.returncode}: {stderr.strip().splitlines()[-1:]}")
    if to_verdict is not None and to_verdict > bound:
        problems.append(f"time to verdict {to_verdict:.2f} s > {bound} s")
    leaks = {
        "processes": leftover_processes(pids, markers),
        "ports": leftover_listeners(ips),
        "dirs": [str(p) for p in scratch.iterdir()],
    }
    problems += [f"leaked {k}: {v}" for k, v in leaks.items() if v]
    return {
        "i": i,
        "target": f"{Path(target.stack).stem}.{target.backend}",
        "kind": kind,
        "fault": " ".join(fault),
        "verdict": w["verdict"],
        "restarts": w["restarts"],
        "ok": not problems,
        "problems": problems,
        "to_verdict": to_verdict,
        "wall": wall,
        "leaks": {k: len(v) for k, v in leaks.items()},
        "pids": sorted(pids),
        "ips": sorted(ips),
        "scratch": str(scratch),
        "markers": markers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    start = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="jaxinfra-stress-") as tmp:
        for i in range(args.runs):
            res = run_one(i, rng, Path(tmp))
            results.append(res)
            status = "ok" if res["ok"] else "FAIL: " + "; ".join(res["problems"])
            tv = f"{res['to_verdict']:.2f} s" if res["to_verdict"] is not None else "-"
            print(
                f"{i:3d} {res['target']:<14} {res['kind']:<13} {res['fault']:<22} -> {res['verdict']:<9} "
                f"restarts {res['restarts']}  to verdict {tv:<7} wall {res['wall']:.2f} s  {status}",
                flush=True,
            )
        # the end: nothing from any run, anywhere
        final = {
            "processes": leftover_processes(
                {p for r in results for p in r["pids"]}, [m for r in results for m in r["markers"]]
            ),
            "ports": leftover_listeners({ip for r in results for ip in r["ips"]}),
            "dirs": [str(p) for r in results for p in Path(r["scratch"]).iterdir()],
        }
    total = time.perf_counter() - start
    by_kind = Counter(r["kind"] for r in results)
    worst: dict[str, float] = defaultdict(float)
    for r in results:
        if r["to_verdict"] is not None:
            worst[r["kind"]] = max(worst[r["kind"]], r["to_verdict"])
    correct = sum(r["ok"] for r in results)
    leaks = {k: sum(r["leaks"][k] for r in results) + len(final[k]) for k in final}
    print(f"\nseed {args.seed}: {args.runs} simulations in {total:.1f} s")
    print("faults injected: " + ", ".join(f"{k} {by_kind[k]}" for k in KINDS))
    print(f"verdicts correct (verdict, restarts, exit status, time bound): {correct} / {len(results)}")
    print(
        f"leaks: processes {leaks['processes']}, ports {leaks['ports']}, temp dirs {leaks['dirs']}"
        + (f"  (at the end: {final})" if any(final.values()) else "")
    )
    print(
        "worst time to verdict: "
        + ", ".join(f"{k} {worst[k]:.2f} s" for k in KINDS if k in worst)
        + f"  (bounds: crash {CRASH_BOUND} s, hang / late start {HANG_BOUND} s, stop to exit {STOP_BOUND} s)"
    )
    if correct != len(results) or any(leaks.values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
