"""A new venv with jaxinfra installed from wheels of this checkout (jaxinfra and its simulator, jaxinfra-sim), the way
a team's repository gets it.

Built once per session, in the background: conftest's `pytest_collection_finish` calls `start` as soon as the
session knows a selected test needs the venv, so the install (half a minute on 2 cores, mostly unpacking jax and
pulumi-gcp) overlaps the unit tier that runs first; `wait` is the `fresh_venv` fixture's. Under pytest-xdist every
worker shares one build in the folder the controller made: the first worker to claim it builds, the others wait for
its status file.

    python -m tests.support.fresh_venv BASE    # builds BASE/venv, logging to BASE/build.log, then writes BASE/status
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import ROOT

#: The session's folder for the build: made by the process that ends the session (xdist's controller, or pytest
#: itself) and handed to each xdist worker by conftest.
BASE = pytest.StashKey[Path]()
#: The build this process started, if it claimed the session's folder (kept so that it is reaped with the session).
KEY = pytest.StashKey["subprocess.Popen[bytes] | None"]()

#: The environment of every process a fresh venv runs: nothing of this checkout's venv leaks into it, and bytecode
#: is written (where PYTHONDONTWRITEBYTECODE is set, as on this machine, the venv installed without .pyc would
#: compile jax anew in every process): each module is compiled once, by the first process that imports it.
CLEAN_ENV = {
    k: v
    for k, v in os.environ.items()
    if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")
}
#: What the source copy leaves out: an in-tree build would reuse a stale build/ folder.
IGNORED = (".git", ".venv", "node_modules", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
           ".hypothesis", "out", "site")  # fmt: skip


def build(base: Path) -> Path:
    """BASE/venv with the wheels and every extra a scaffold's README installs, plus what its train/ needs."""
    from jaxinfra import init

    source = base / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*IGNORED))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    wheel_dir = base / "wheel"
    subprocess.run(
        [*pip, "wheel", "--quiet", "--no-deps", str(source), str(source / "simulate"), "-w", str(wheel_dir)],
        check=True,
        env=CLEAN_ENV,
    )
    [wheel], [simulator] = wheel_dir.glob("jaxinfra-*.whl"), wheel_dir.glob("jaxinfra_sim-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=CLEAN_ENV)
    train = [
        line.strip().strip('",')
        for line in init.render("cpu")["pyproject.toml"].splitlines()
        if line.strip().startswith(('"optax', '"orbax'))
    ]
    # uv (a dev dependency) installs what pip would, in a fifth of the time; no .pyc up front: what runs compiles
    # what it imports (CLEAN_ENV). The scaffold's own `pip install -e` then runs with the venv's pip, as a user's does.
    subprocess.run(
        [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", str(venv / "bin/python"),
         f"{wheel}[sim,validate,cdk8s,pulumi]", str(simulator), *train],
        check=True,
        env=CLEAN_ENV,
    )  # fmt: skip
    return venv


def start(base: Path) -> subprocess.Popen[bytes] | None:
    """Build BASE/venv in a process of its own (its output goes to BASE/build.log), unless another worker of the
    session already claimed BASE (then None)."""
    try:
        (base / "claimed").mkdir()  # atomic: exactly one worker of the session builds
    except FileExistsError:
        return None
    with open(base / "build.log", "wb") as log:
        build = subprocess.Popen(
            [sys.executable, "-m", "tests.support.fresh_venv", str(base)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**CLEAN_ENV, "PYTHONPATH": str(ROOT)},
            start_new_session=True,  # its own group: `stop` ends pip and everything it started
        )
    (base / "claimed" / "pid").write_text(str(build.pid))
    return build


def wait(base: Path, timeout: float = 1200) -> Path:
    """The venv, once built (by whichever worker claimed it); a failed build fails the test that needs it with the
    build's own output."""
    status, deadline = base / "status", time.monotonic() + timeout
    while not status.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    log = base / "build.log"
    assert status.exists() and status.read_text() == "0", log.read_text()[-3000:] if log.exists() else "no build"
    return base / "venv"


def stop(base: Path) -> None:
    """End a build the session no longer waits for (an early failure, -x, Ctrl-C): called once every worker has
    ended, by the process that ends the session."""
    pid = base / "claimed" / "pid"
    if pid.exists() and not (base / "status").exists():
        try:
            os.killpg(int(pid.read_text()), signal.SIGKILL)
        except ProcessLookupError:
            pass


if __name__ == "__main__":
    code = 1
    try:
        build(Path(sys.argv[1]))
        code = 0
    finally:  # written last, whatever happened: the status file is what every waiting worker polls for
        (Path(sys.argv[1]) / "status").write_text(str(code))
