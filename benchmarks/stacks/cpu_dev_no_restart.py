"""stacks/cpu_dev.py without its group restart (max_restarts 0): the first failure is the
verdict, which the simulator's fault tests and the stress run read (the example stack restarts once, recovering a
first attempt's fault)."""

from pathlib import Path

from jaxinfra import stack
from jaxinfra.spec import raw

_dev = stack.load(Path(__file__).resolve().parents[2] / "stacks" / "cpu_dev.py")
cluster = _dev.with_changes(jobs=[{**raw(job), "max_restarts": 0} for job in _dev.jobs])
