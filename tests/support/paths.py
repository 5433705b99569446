"""Where the tests' inputs are: the checkout (a training-infrastructure project too), its stacks, the training
program."""

from __future__ import annotations

from pathlib import Path

from jaxinfra import stack

#: The checkout's root: the stacks, Pulumi and cdk8s files a team's repository holds, beside the library.
ROOT = Path(__file__).resolve().parents[2]
STACKS = stack.discover(ROOT / "stacks")
#: The training program the stacks run (`python -m train`), equal to what `jaxinfra init` writes (tests/test_init.py).
TRAIN = ROOT / "train"
#: The example stack without its restart: the first failure is the verdict (the fault tests' input).
NO_RESTART = "benchmarks/stacks/cpu_dev_no_restart.py"
#: Hand-written manifests in the styles of upstream examples (each file says whose).
MANIFESTS = ROOT / "tests" / "manifests"
