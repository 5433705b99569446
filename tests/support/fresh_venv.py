"""A new venv with jaxinfra installed from a wheel of this checkout, the way a team's repository gets it.

Built once per session, in the background: `start` launches this module as a program as soon as the session knows
a selected test needs the venv (conftest's `pytest_collection_finish`), so the install (half a minute on 2 cores,
mostly unpacking jax and pulumi-gcp) overlaps the unit tier that runs first; `wait` is the `fresh_venv` fixture's.

    python -m tests.support.fresh_venv BASE    # builds BASE/venv, logging to BASE/build.log
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

#: Where the session keeps the build (BASE, its process): set by conftest, read by the `fresh_venv` fixture.
KEY = pytest.StashKey[tuple[Path, "subprocess.Popen[bytes]"]]()

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
    """BASE/venv with the wheel and every extra a scaffold's README installs, plus what its train/ needs."""
    from jaxinfra import init

    source = base / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*IGNORED))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    wheel_dir = base / "wheel"
    subprocess.run(
        [*pip, "wheel", "--quiet", "--no-deps", str(source), "-w", str(wheel_dir)], check=True, env=CLEAN_ENV
    )
    [wheel] = wheel_dir.glob("jaxinfra-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=CLEAN_ENV)
    train = [
        line.strip().strip('",')
        for line in init.render("cpu")["pyproject.toml"].splitlines()
        if line.strip().startswith(('"optax', '"orbax'))
    ]
    subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-compile",  # not all of jax and pulumi-gcp up front: what runs compiles what it imports (CLEAN_ENV)
         f"{wheel}[sim,validate,cdk8s,pulumi]", *train],
        check=True,
        env=CLEAN_ENV,
    )  # fmt: skip
    return venv


def start(base: Path) -> subprocess.Popen[bytes]:
    """Build BASE/venv in a process of its own; its output goes to BASE/build.log."""
    with open(base / "build.log", "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.fresh_venv", str(base)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**CLEAN_ENV, "PYTHONPATH": str(ROOT)},
            start_new_session=True,  # a Ctrl-C of pytest reaches it through `stop`, not half-way through pip
        )


def wait(base: Path, build: subprocess.Popen[bytes], timeout: float = 1200) -> Path:
    """The venv, once built; a failed build fails the test that needs it with the build's own output."""
    code = build.wait(timeout=timeout)
    assert code == 0, (base / "build.log").read_text()[-3000:]
    return base / "venv"


def stop(build: subprocess.Popen[bytes]) -> None:
    """End a build the session no longer waits for (an early failure, -x, Ctrl-C)."""
    if build.poll() is None:
        build.kill()
        build.wait()


if __name__ == "__main__":
    build(Path(sys.argv[1]))
