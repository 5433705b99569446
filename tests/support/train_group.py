"""Run jaxinfra/templates/train as a group of local processes, each with the env contract of its rank, as the
pods of a job would get it. Shared by tests/test_train_example.py and benchmarks/train.py."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.support.paths import TRAIN

STEP = re.compile(r"^step (\d+) loss (\S+)$", re.M)
#: Variables a parent shell may carry that would change what the program sees.
_SCRUB = re.compile(r"^(JAX_|TRAIN_|JAXINFRA_|MEGASCALE_|TPU_|XLA_|COORDINATOR_|NUM_PROCESSES$|PROCESS_ID$)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def contract(variant: str, processes: int, rank: int, port: int) -> dict[str, str]:
    """The distributed env of one rank: `jaxinfra` (also Kubeflow Trainer v2's), `kubeflow-v1`
    (Training Operator v1), or `none` (a lone process: no distributed runtime)."""
    if variant == "jaxinfra":
        return {
            "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
            "JAX_NUM_PROCESSES": str(processes),
            "JAX_PROCESS_ID": str(rank),
        }
    if variant == "kubeflow-v1":
        return {
            "COORDINATOR_ADDRESS": "127.0.0.1",
            "COORDINATOR_PORT": str(port),
            "NUM_PROCESSES": str(processes),
            "PROCESS_ID": str(rank),
        }
    if variant == "none":
        assert processes == 1, "without a contract there is one process"
        return {}
    raise ValueError(variant)


class Group:
    """`processes` x `devices` CPU devices running `python -m train` in jaxinfra/templates/train, logs in `logs`."""

    def __init__(
        self,
        logs: Path,
        processes: int,
        devices: int,
        env: dict[str, str] | None = None,
        variant: str | None = None,
        python: str = sys.executable,
    ):
        variant = variant or ("jaxinfra" if processes > 1 else "none")
        logs.mkdir(parents=True, exist_ok=True)
        port = free_port()
        base = {k: v for k, v in os.environ.items() if not _SCRUB.match(k)}
        base.update(
            {
                "JAX_PLATFORMS": "cpu",
                "JAX_NUM_CPU_DEVICES": str(devices),
                "JAX_INITIALIZATION_TIMEOUT": "30",
                "TRAIN_HEARTBEAT_TIMEOUT": "10",
                "TRAIN_SHUTDOWN_TIMEOUT": "10",
                "HOME": str(logs / "no-such-home"),  # pods run as uid 1000, whose HOME may not exist
                # The kubelet sets these in every container; with the `kubernetes` package importable and no
                # token mounted, JAX's K8s detection would crash initialize (issue 12) unless switched off.
                "KUBERNETES_SERVICE_HOST": "10.0.0.1",
                "KUBERNETES_SERVICE_PORT": "443",
                **(env or {}),
            }
        )
        self.logs = [logs / f"rank{r}.log" for r in range(processes)]
        self.procs = []
        for rank in range(processes):
            with open(self.logs[rank], "w") as out:
                self.procs.append(
                    subprocess.Popen(
                        [python, "-m", "train"],
                        cwd=TRAIN,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env={**base, **contract(variant, processes, rank, port)},
                    )
                )

    def output(self, rank: int = 0) -> str:
        return self.logs[rank].read_text()

    def losses(self, rank: int = 0) -> dict[int, float]:
        return {int(s): float(v) for s, v in STEP.findall(self.output(rank))}

    def wait_for(self, predicate, timeout: float = 60) -> None:  # noqa: ANN001  (a () -> bool)
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                raise AssertionError(f"condition not met; rank 0 said:\n{self.output()}")
            time.sleep(0.02)

    def signal(self, sig: signal.Signals, ranks: list[int] | None = None) -> None:
        for rank in ranks if ranks is not None else range(len(self.procs)):
            self.procs[rank].send_signal(sig)

    def wait(self, timeout: float = 120) -> list[int]:
        """Every process's exit status; a process still running at the deadline is killed (-9)."""
        deadline = time.monotonic() + timeout
        codes = []
        for p in self.procs:
            try:
                codes.append(p.wait(max(deadline - time.monotonic(), 0.01)))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append(p.wait())
        return codes

    def __enter__(self) -> Group:
        return self

    def __exit__(self, *_: object) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def committed_steps(directory: Path) -> set[int]:
    """Steps orbax has finished writing: it writes each into a temporary folder and renames it to
    the bare step number when complete (orbax-checkpoint, _src/path/atomicity.py)."""
    return {int(p.name) for p in directory.iterdir() if p.name.isdigit()} if directory.exists() else set()
