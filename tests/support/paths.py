"""Where the tests' inputs are: the checkout, the example project and its stacks, the training program."""

from __future__ import annotations

from pathlib import Path

from jaxinfra import stack

ROOT = Path(__file__).resolve().parents[2]
#: The example project: the stacks, Pulumi and cdk8s files a team's repository holds
#: (examples/training-infra/README.md).
EXAMPLE = ROOT / "examples" / "training-infra"
STACKS = stack.discover(EXAMPLE / "stacks")
#: The training program `jaxinfra init` writes and the example's stacks run (`python -m train`): package data.
TRAIN = ROOT / "src" / "jaxinfra" / "templates" / "train"
#: The example stack without its restart: the first failure is the verdict (the fault tests' input).
NO_RESTART = "benchmarks/stacks/cpu_dev_no_restart.py"
#: Hand-written manifests in the styles of upstream examples (each file says whose).
MANIFESTS = ROOT / "tests" / "manifests"
