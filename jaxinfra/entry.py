"""The `jaxinfra` process: exit statuses, signals, and the simulator's prefork, before any heavy import.

Nothing here imports typer or pydantic, so `jaxinfra simulate` forks the child that imports JAX
(see `jaxinfra.prefork`) before the command line is even parsed; `jaxinfra.cli` holds the commands.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jaxinfra import descriptors, interrupts
from jaxinfra.errors import INPUT_ERROR, CommandFailed, JaxinfraError

if TYPE_CHECKING:
    from jaxinfra.prefork import Prefork
    from jaxinfra_sim.cluster.sources import Request


def status(call: Callable[[], Any]) -> int:
    """Run `call` and return the exit status: every input problem as a line plus a summary
    (status 2), a failed command's summary line; never a traceback."""
    try:
        call()
        return 0
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else int(done.code is not None)
    except JaxinfraError as err:
        for p in err.problems:
            print(f"error: {p}", file=sys.stderr)
        n = len(err.problems)
        print(f"jaxinfra: {n} {'problem' if n == 1 else 'problems'} ({err.kind}); nothing written", file=sys.stderr)
        return INPUT_ERROR
    except CommandFailed as err:
        print(f"jaxinfra: {err}", file=sys.stderr)
        return err.status
    except KeyboardInterrupt:
        return 130


def _warm_simulator() -> None:
    """The prefork child's preparation: the simulator and what its pods need (engine.preload)."""
    from jaxinfra_sim.cluster import engine
    from jaxinfra_sim.network import netns
    from jaxinfra_sim.runtime import sandbox  # noqa: F401

    try:
        sandbox.preflight()  # while this process is small: a fork costs less before JAX is imported
        if "--no-egress" not in sys.argv:  # (the default network, with egress: what `Network.create()` takes)
            netns.prestart()  # the pods' network starts while JAX is imported
    except sandbox.Unavailable:
        pass  # the simulation reports it, if it has anything to run
    engine.preload()


def _simulate(request: Request) -> int:
    """The prefork child's work: the rest of `jaxinfra simulate`, once the parent has read the inputs."""
    from jaxinfra_sim.report.terminal import run

    return status(lambda: run(request))


def _protect() -> None:
    """`simulate` is the node's agents (kubelet, runtime, CNI): the OOM killer ends a pod's process before any of
    them, and before the child `_prefork` starts (`jaxinfra_sim.kubelet.qos`)."""
    try:
        from jaxinfra_sim.kubelet.qos import protect_node_agents
    except ImportError:  # no simulator installed: `simulate` says so itself
        return
    protect_node_agents()


def _prefork(args: list[str]) -> Prefork | None:
    """For `simulate` with the built-in probe, a child importing JAX while the inputs are read."""
    if args[:1] != ["simulate"] or {"--run-command", "--help"} & set(args):
        return None
    from jaxinfra.prefork import Prefork

    return Prefork(_warm_simulator, _simulate)


def run(argv: list[str] | None) -> int:
    """Run the app on `argv` (default: this process's arguments); its exit status."""
    # Pydantic plugins observe validation for apps; this short-lived command needs none, and
    # discovering them (an entry-point scan) is a tenth of its start-up. Typer does the same.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "1")
    descriptors.record()  # before this process opens any of its own
    interrupts.install()
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["--version"]:
        from jaxinfra.init import version_line

        print(version_line())
        return 0
    warm: list[Prefork] = []

    def command() -> None:  # all of it inside `status`: a Ctrl-C while typer is imported is exit 130 too
        if args[:1] == ["simulate"]:
            _protect()
        child = _prefork(args)
        if child is not None:
            warm.append(child)
        from jaxinfra.cli import app

        app(args=args, standalone_mode=True, obj=child)

    try:
        return status(command)
    finally:
        for w in warm:
            w.cancel()


def main(argv: list[str] | None = None) -> None:
    """Run the app and exit with its status (2 for input problems)."""
    sys.exit(run(argv))


def entry() -> None:
    """The console script: `main`, then exit without interpreter teardown.

    Tearing down pydantic and the rest module by module is a fifth of a short command like
    `synth` (and 0.15 s more once jax is loaded); by then every file is written and closed.
    """
    code = run(None)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe (`| head`): nothing more can be said
        pass
    os._exit(code)
