"""What the simulator loads at run time (tests/test_layers.py reads the source; this runs it): a JobSet through the
API server's front door and the controllers, in a process of its own, loads nothing of jaxinfra's model."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from jaxinfra_sim.network.netns import HOLDER
from tests.support.paths import ROOT
from tests.test_layers import HOLDER_MODULES, THE_MODEL, layer_of

pytestmark = pytest.mark.simulator


def test_the_simulator_never_loads_the_model_at_run_time() -> None:
    """A JobSet with a Kueue queue through the front door and the controllers, in a process of its own: every module
    that ran is the cluster emulator's (the front door's lazy imports included)."""
    code = textwrap.dedent(
        """
        import sys
        from jaxinfra.admission import read
        from jaxinfra_sim.cluster import control_plane, sources
        requests, problems = read([sys.argv[1]])
        source = sources.admitted(sys.argv[1], requests)
        assert not problems and not source.problems, (problems, source.problems)
        control_plane.emulate(source.manifests)
        print(" ".join(sorted(m for m in sys.modules if m.startswith("jaxinfra"))))
        """
    )
    run = subprocess.run([sys.executable, "-c", code, str(ROOT / "tests/manifests/jobset_gpu_a3high_xpk_style.yaml")],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    loaded = run.stdout.split()
    assert "jaxinfra_sim.controllers.jobset" in loaded and "jaxinfra.releases" in loaded  # the controllers, the door
    model = {layer_of(m) for m in loaded if m.startswith("jaxinfra.")} & THE_MODEL
    assert not model, f"a simulation loaded jaxinfra's {sorted(model)}"


def test_the_holders_program_loads_only_its_own_modules() -> None:
    """The pods' network's holder as `netns.HOLDER` runs it (`python -I -S`: no folder on sys.path, no site-packages):
    its modules beside it load through the stand-in for the package, whose `__init__` never runs, and nothing else of
    the simulator does."""
    code = (
        "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__'); "
        "print(getattr(sys.modules['jaxinfra_sim'], '__file__', None), "
        "*sorted(m for m in sys.modules if m.startswith('jaxinfra')))"
    )
    run = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(HOLDER)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == [
        "None",
        "jaxinfra_sim",
        "jaxinfra_sim.network",
        *sorted(f"jaxinfra_sim.network.{m}" for m in HOLDER_MODULES - {"netns_holder"}),
    ]
