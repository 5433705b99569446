"""Ctrl-C is never lost: not when its handler runs inside a callback whose exceptions Python ignores (a
garbage-collection callback here; JAX installs one, and os.fork runs at-fork callbacks), nor during a fork.
Each case runs in its own interpreter, whose signal handlers it may change."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.simulator


def run(body: str) -> subprocess.CompletedProcess[str]:
    script = (
        "import gc, os, signal, sys, time\nfrom jaxinfra import interrupts\ninterrupts.install()\n"
        + textwrap.dedent(body)
    )
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_a_ctrl_c_that_a_callback_swallowed_is_raised_again_once() -> None:
    r = run("""
        def callback(phase, info):
            if phase == "start":
                os.kill(os.getpid(), signal.SIGINT)   # its handler runs in here, where Python ignores what it raises
        gc.callbacks.append(callback)
        gc.collect()
        gc.callbacks.remove(callback)
        print("ran on")
        try:
            interrupts.check()
        except KeyboardInterrupt:
            print("raised again")
        interrupts.check()
        print("once")
    """)
    assert r.returncode == 0, r.stderr
    assert "Exception ignored" in r.stderr and "KeyboardInterrupt" in r.stderr, "the callback did swallow it"
    assert r.stdout.split() == ["ran", "on", "raised", "again", "once"]


def test_sigterm_latched_the_same_way_exits_143() -> None:
    r = run("""
        def callback(phase, info):
            if phase == "start":
                os.kill(os.getpid(), signal.SIGTERM)
        gc.callbacks.append(callback)
        gc.collect()
        gc.callbacks.remove(callback)
        interrupts.check()
        print("not reached")
    """)
    assert r.returncode == 143 and "not reached" not in r.stdout, (r.returncode, r.stdout, r.stderr)


def test_a_ctrl_c_during_a_held_fork_comes_after_it_in_the_parent_and_when_released_in_the_child() -> None:
    r = run("""
        read, write = os.pipe()
        try:
            with interrupts.held():
                os.kill(os.getpid(), signal.SIGINT)   # as if Ctrl-C came while forking
                time.sleep(0.05)
                pid = os.fork()
                if pid == 0:   # (pending signals are not inherited: the group's Ctrl-C reaches the child on its own)
                    try:
                        os.kill(os.getpid(), signal.SIGINT)
                        signal.signal(signal.SIGINT, signal.SIG_DFL)   # its own disposition first
                        os.write(write, b"child set up;")
                        interrupts.release()
                        os.write(write, b"child ran on;")
                    finally:
                        os._exit(0)
                print("parent recorded the child")
        except KeyboardInterrupt:
            print("parent interrupted after the block")
        _, status = os.waitpid(pid, 0)
        os.close(write)
        print(os.read(read, 100).decode(), os.WIFSIGNALED(status) and signal.Signals(os.WTERMSIG(status)).name)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "parent recorded the child",
        "parent interrupted after the block",
        "child set up; SIGINT",
    ]
