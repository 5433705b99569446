"""How many JAX processes a pod holds, read from what its containers say: one (the usual), one per accelerator
container, or several started by its JAX container's command — a launcher, a shell loop, or ranks computed from the
pod's index — with each process's devices, its container, and where the number came from.

The patterns, each as its source writes it (the facts carried over; tests use commands in their style):
- several accelerator containers: xpk renders `parallel_containers` main containers per pod on a TPU7x VM, each
  requesting the VM's chips divided among them, each a JAX process (AI-Hypercomputer/xpk@367c838,
  src/xpk/core/docker_container.py `get_main_container`, src/xpk/core/docker_resources.py
  `get_main_container_resources`, src/xpk/core/system_characteristics.py: tpu7x `parallel_containers=2`);
- JAX-Toolbox's `parallel-launch VAR N command...`: N copies in the background, VAR set to 0..N-1 in each, then waits
  for all (NVIDIA/JAX-Toolbox@bcbbfa5, .github/container/parallel-launch; its EKS MaxText Job
  .github/eks-workflow-files/maxtext-job.yaml runs 8 per pod, one per GPU);
- a shell loop starting a process per GPU in the background (`&`), the count from `nvidia-smi -L` or
  `--list-gpus` (JAX-Toolbox .github/container/test-maxtext.sh `GPUS_PER_NODE`, .github/container/pytest-xdist.sh);
- torchrun's `--nproc-per-node`/`--nproc_per_node`: an int, or `gpu`/`auto` for the node's accelerator count,
  default 1 (pytorch/pytorch@010929f, torch/distributed/run.py `get_args_parser`, `determine_local_world_size`);
- ranks computed from the pod's index, `$((JOB_COMPLETION_INDEX*K + LOCAL))`: K processes per pod, passed as JAX's
  own arguments (`--process_id`, `JAX_PROCESS_ID`: the names of `jax.distributed.initialize`'s, jax-ml/jax v0.10.2
  jax/_src/distributed.py), as MaxText's `NODE_RANK` (with `NNODES`, `JAX_COORDINATOR_IP`: AI-Hypercomputer/maxtext
  @e591f30, src/maxtext/utils/max_utils.py `initialize_jax_for_gpu`), or as Pax's `--host_idx` (with
  `--multiprocess_gpu`, `--server_addr`, `--num_hosts`: google/paxml@b397693, paxml/main.py).
What no pattern reads is one process; where a launcher or loop is there but its count is not readable (a count this
machine cannot know, a list read from a file), one process is assumed and the answer says so.

Devices: an accelerator pod's chips are split among its processes (one per GPU where the count is the GPU count); a
CPU pod's processes each see its JAX_NUM_CPU_DEVICES devices, the env they share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jaxinfra.upstream import GPU_RESOURCE, JOB_COMPLETION_INDEX, TPU_RESOURCE
from jaxinfra_sim.core import model

Source = model.Launch
Processes = model.Processes


_WORD = re.compile(r"\$\(\([^)]*\)\)|\S+")  # a shell word, `$((a - 1))` whole
_GPU_COUNT = re.compile(r"nvidia-smi\s+(?:-L|--list-gpus|--query-gpu=\S+)")
_ARITH = re.compile(r"\$\(\(\s*(.+?)\s*(?:([-+])\s*(\d+)\s*)?\)\)")  # $((N)), $((N-1))
_NAME = re.compile(r"\$?\{?([A-Za-z_]\w*)(?::-(\d+))?\}?")  # N, $N, ${N}, ${N:-8}
_BACKGROUND = re.compile(r"(?<![&>|])&(?![&>])")  # `cmd &`, not `&&`, `2>&1` or `&>`
_FOR_IN = re.compile(r"\bfor\s+\w+\s+in\s+(.+?)\s*;?\s*do\b(.*?)\bdone\b", re.S)
_FOR_C = re.compile(
    r"\bfor\s*\(\(\s*\w+\s*=\s*(\w+)\s*;\s*\w+\s*(<=?)\s*([^;]+?)\s*;[^)]*\)\)\s*;?\s*do\b(.*?)\bdone\b", re.S
)
_SEQ = re.compile(r"(?:\$\(|`)\s*seq\s+(.+?)\s*(?:\)|`)", re.S)
_VALUE = r"(\$\([^)]*\)+|\"[^\"]*\"|\S+)"  # what an assignment sets: `$(...)`, `$((...))`, "...", a word
_BRACES = re.compile(r"\{(\d+)\.\.(\d+)\}")
_PARALLEL_LAUNCH = re.compile(r"\bparallel-launch\s+\w+\s+(\S+)")
_TORCHRUN = re.compile(r"\b(?:torchrun|torch\.distributed\.(?:run|launch))\b")
_NPROC = re.compile(r"--nproc[-_]per[-_]node(?:=|\s+)(\S+)")
_VAR = r"\$?\{?(\w+)\}?"  # N, $N, ${N}
_RANK = re.compile(rf"(--[\w-]+|\b\w+)[=\s]\s*[\"']?\$\(\(\s*{_VAR}\s*\*\s*(\$?\{{?\w+\}}?)\s*\+\s*{_VAR}\s*\)\)")
"""A rank computed as the pod's index times its processes plus a local index: the pod's index is its completion index
(the Job controller's, which the scripts read); a product of other indexes (a TPU slice's id times its hosts plus the
host's TPU_WORKER_ID) ranks pods, not a pod's processes (`POD_INDEXES`)."""
POD_INDEXES = frozenset({"TPU_WORKER_ID", "MEGASCALE_SLICE_ID", JOB_COMPLETION_INDEX, "JOB_INDEX"})
"""Indexes of a pod (GKE's TPU env, the Job controller's, JobSet's job index as scripts name it), never of a process
within one."""
_RANK_NAMES = {
    "--host_idx": Source.PAX,
    "NODE_RANK": Source.MAXTEXT,
    "--process_id": Source.JAX_FLAGS,
    "--process-id": Source.JAX_FLAGS,
    "JAX_PROCESS_ID": Source.JAX_FLAGS,
}
"""What a computed rank is passed as, and whose convention that is."""

Count = tuple[int, str]  # a count and how it was read ("" when written as a number)


@dataclass(frozen=True)
class _Found:
    """A pattern in the command: whose, how many processes (None: not readable), its words."""

    source: Source
    count: int | None
    evidence: str


def processes(pod: model.Pod) -> Processes:
    """The JAX processes of `pod`.

    What starts the processes (a launcher, a loop) gives the count where it is readable, the ranks it computes
    corroborating; else the ranks' stride; else, where either is there, one process is assumed."""
    mains = [c for c in pod.others if c.role == "main" and c.chips > 0]
    if pod.accelerator != "cpu" and mains:
        resource = TPU_RESOURCE if pod.accelerator == "tpu" else GPU_RESOURCE
        devices = (pod.devices, *(c.chips for c in mains))
        names = (pod.container, *(c.name for c in mains))
        said = ", ".join(f"{n} {resource}: {d}" for n, d in zip(names, devices))
        return Processes(devices, names, Source.CONTAINERS, f"containers {said}")
    script = " ".join((*pod.command, *pod.args))
    starts, ranks = _launcher(script, pod), _computed_ranks(script, pod)
    if starts is not None and starts.count is not None:
        source, count, said = starts.source, starts.count, "; ranks ".join(f.evidence for f in (starts, ranks) if f)
    elif ranks is not None and ranks.count is not None:
        source, count, said = ranks.source, ranks.count, "; started by ".join(f.evidence for f in (ranks, starts) if f)
    else:
        said = "; ".join(f.evidence for f in (starts, ranks) if f)
        return Processes((pod.devices,), (pod.container,), Source.ASSUMED if said else Source.ONE, said)
    return Processes(_split(pod, count), (pod.container,) * count, source, said)


def _split(pod: model.Pod, count: int) -> tuple[int, ...]:
    """Each process's devices: an accelerator pod's chips shared out (at least one each), a CPU pod's
    JAX_NUM_CPU_DEVICES for every process."""
    if pod.accelerator == "cpu":
        return (pod.devices,) * count
    base, extra = divmod(pod.devices, count)
    return tuple(max(1, base + (i < extra)) for i in range(count))


def _found(source: Source, count: Count | None, words: str) -> _Found:
    """A pattern found, its count (a positive one) and the evidence: its words, how the count was read or that it
    could not be."""
    if count is None or count[0] < 1:
        return _Found(source, None, f"`{words}`: the count is not readable from the manifest")
    return _Found(source, count[0], f"`{words}`" + (f": {count[1]}" if count[1] else ""))


def _computed_ranks(script: str, pod: model.Pod) -> _Found | None:
    """`--process_id=$((JOB_COMPLETION_INDEX*K + i))` and the like: K processes per pod."""
    for m in _RANK.finditer(script):
        source = _RANK_NAMES.get(m[1])
        if source is not None and m[2] == JOB_COMPLETION_INDEX and m[4] not in POD_INDEXES:
            return _found(source, _count(m[3], script, pod), m[0].lstrip())
    return None


def _launcher(script: str, pod: model.Pod) -> _Found | None:
    """A launcher or a loop that starts the processes: how many."""
    if m := _PARALLEL_LAUNCH.search(script):
        return _found(Source.PARALLEL_LAUNCH, _count(m[1], script, pod), m[0])
    if _TORCHRUN.search(script):
        if not (m := _NPROC.search(script)):
            return _Found(Source.TORCHRUN, 1, "torchrun's default --nproc-per-node 1")
        value = m[1].strip("\"'")
        if value in ("gpu", "auto") and pod.accelerator != "cpu":
            return _found(Source.TORCHRUN, (pod.devices, f"the container's {pod.devices} accelerators"), m[0])
        return _found(Source.TORCHRUN, _count(value, script, pod), m[0])
    for loop in _FOR_IN.finditer(script):
        if _BACKGROUND.search(loop[2]):
            return _found(Source.SHELL_LOOP, _items(loop[1], script, pod), _header(loop[0]))
    for loop in _FOR_C.finditer(script):
        if _BACKGROUND.search(loop[4]):
            start, end = _count(loop[1], script, pod), _count(loop[3], script, pod)
            count = (end[0] - start[0] + (loop[2] == "<="), end[1]) if start and end else None
            return _found(Source.SHELL_LOOP, count, _header(loop[0]))
    return None


def _header(loop: str) -> str:
    """A loop as the evidence quotes it: its header, its body's background start."""
    return re.split(r"\bdo\b", loop, maxsplit=1)[0].strip().rstrip(";") + "; do ... & done"


def _items(words: str, script: str, pod: model.Pod) -> Count | None:
    """How many items a `for x in WORDS` loop takes: `$(seq A B)`, `{A..B}`, the GPUs nvidia-smi lists, a list."""
    if m := _SEQ.fullmatch(words):  # seq LAST, seq FIRST LAST
        bounds = _WORD.findall(m[1])
        if len(bounds) not in (1, 2):
            return None
        first = _count(bounds[0], script, pod) if len(bounds) == 2 else (1, "")
        last = _count(bounds[-1], script, pod)
        return (last[0] - first[0] + 1, first[1] or last[1]) if first and last else None
    if m := _BRACES.fullmatch(words):
        return int(m[2]) - int(m[1]) + 1, ""
    if _GPU_COUNT.search(words):
        return _gpus(pod)
    listed = words.split()
    return (len(listed), "") if "$" not in words and "`" not in words else None


def _gpus(pod: model.Pod) -> Count | None:
    """What nvidia-smi lists in the container: its GPUs (nothing readable in a pod without)."""
    if pod.accelerator != "gpu":
        return None
    return pod.devices, f"nvidia-smi's GPU count, the container's {GPU_RESOURCE}: {pod.devices}"


def _count(word: str, script: str, pod: model.Pod, depth: int = 0) -> Count | None:
    """A number the command writes: literal, `$((N-1))`, `$N`/`${N:-8}` set earlier in the script or in the
    container's env, or nvidia-smi's GPU count."""
    word = word.strip().strip("\"'")
    if word.isdigit():
        return int(word), ""
    if depth > 4:
        return None
    if _GPU_COUNT.search(word):
        return _gpus(pod)
    if m := _ARITH.fullmatch(word):
        inner = _count(m[1], script, pod, depth + 1)
        if inner is None or not m[2]:
            return inner
        return inner[0] + int(m[3]) * (1 if m[2] == "+" else -1), inner[1]
    if not (m := _NAME.fullmatch(word)):
        return None
    name = m[1]
    assigned = re.findall(rf"(?:^|[\s;&(])(?:export\s+|local\s+|readonly\s+)?{name}={_VALUE}", script)
    if assigned:
        found = _count(assigned[-1].rstrip(";"), script, pod, depth + 1)
        return (found[0], f"{name} = {found[1] or found[0]}") if found else None
    if (value := pod.env.get(name, "")).isdigit():
        return int(value), f"{name}={value} in the container's env"
    return (int(m[2]), f"{name} unset, its default {m[2]}") if m[2] else None
