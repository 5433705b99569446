"""Run a command's second half in a child forked at start-up, warmed by its slow imports.

`jaxinfra simulate` needs JAX (half a second to import) only after it has read its inputs
(typer, pydantic, the stacks: a quarter of a second). Forking at start-up lets both happen at
once on two cores: the child imports JAX and waits; the parent reads the inputs and hands the
child the rest of the command. Data flows one way, parent to child; the child owns the
terminal from then on, and its exit status is the command's.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

from jaxinfra import interrupts

Work = Callable[..., int]


class Prefork:
    """A forked child that runs `prepare` now (the slow imports) and `work` on the arguments it is later handed."""

    def __init__(self, prepare: Callable[[], None], work: Work):
        """`work(*args)` runs in the child and returns its exit status, reporting problems
        exactly as the parent would have (it is the caller's own code, inherited by the fork)."""
        read, self._write = os.pipe()
        self.done = False
        with interrupts.held():  # in the child, until it is warm (`_serve`)
            self.pid = os.fork()
            if self.pid == 0:  # the child never returns from here, whatever happens
                code = 1
                try:
                    os.close(self._write)
                    code = _serve(read, prepare, work)
                except SystemExit as stop:  # SIGTERM before the work began
                    code = stop.code if isinstance(stop.code, int) else 1
                finally:
                    os._exit(code)
            os.close(read)

    def hand_over(self, *args: Any) -> int:
        """Run the work on `args` in the child, wait for it, and return its exit status (128 + signal)."""
        self.done = True
        try:
            with os.fdopen(self._write, "wb") as pipe:
                pipe.write(pickle.dumps(args))
        except BrokenPipeError:  # the child is gone already: its status says how
            pass
        # Ctrl-C reaches the child too (same process group); a SIGTERM sent here is passed on.
        # Either way the child ends its pods and says how it ended.
        previous = {
            signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN),
            signal.SIGTERM: signal.signal(signal.SIGTERM, lambda signum, _: os.kill(self.pid, signum)),
        }
        try:
            _, status = os.waitpid(self.pid, 0)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        code = os.waitstatus_to_exitcode(status)
        return code if code >= 0 else 128 - code

    def cancel(self) -> None:
        """The parent ended the command itself (an input error, --help): stop the child now."""
        if self.done:
            return
        self.done = True
        os.close(self._write)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)


def _serve(read: int, prepare: Callable[[], None], work: Work) -> int:
    try:  # SIGINT and SIGTERM are still held (see Prefork): one inside JAX's native start-up aborts the process
        prepare()
    except Exception:  # noqa: BLE001 - the work meets (and reports) the same error itself
        pass
    try:
        interrupts.release()  # now a Ctrl-C held while warming is raised here, where it ends the command cleanly
    except KeyboardInterrupt:
        return 130
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    try:
        return work(*pickle.loads(data)) if data else 0  # nothing handed over: the parent ran it all
    except BaseException:  # noqa: BLE001 - `work` handles what it expects; say what it did not
        traceback.print_exc()
        return 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:  # a closed pipe: nothing more can be said
            pass
