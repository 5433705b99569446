"""This machine while an attempt's pods run (`node.machine`): what it refuses while a pod starts is the machine's
verdict, not the pod's failure; so is the node's folder removed under a pod being prepared (a temp cleaner racing the
kubelet: the pod's files cannot be made), whichever of the two the simulator notices first."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest

from jaxinfra_sim.core.podrun import PodRun
from jaxinfra_sim.node.machine import Machine
from jaxinfra_sim.node.node import Root
from tests.sim.cluster.test_restarts import pod

pytestmark = pytest.mark.unit


def test_a_start_that_fails_because_the_nodes_folder_went_is_the_machines_verdict(tmp_path: Path) -> None:
    folder = tmp_path / "jaxinfra-sim-x"
    folder.mkdir()
    runs = [PodRun(pod(0)), PodRun(pod(1))]
    machine = Machine(runs, Root(folder))
    enoent = FileNotFoundError(errno.ENOENT, "No such file or directory", str(folder / "pod-0" / "0" / "sandbox"))
    assert not machine.refused(enoent, runs[0]) and machine.verdict is None  # the folder is there: not the machine's
    shutil.rmtree(folder)
    assert machine.refused(enoent, runs[0])
    assert machine.verdict is not None and f"the simulation's folder {folder} was removed" in machine.verdict


def test_a_descriptor_refused_while_a_pod_starts_is_the_machines_verdict(tmp_path: Path) -> None:
    runs = [PodRun(pod(0))]
    machine = Machine(runs, Root(tmp_path))
    assert machine.refused(OSError(errno.EMFILE, "Too many open files"), runs[0])
    assert machine.verdict is not None and "this machine ran out of" in machine.verdict
