"""The accelerator catalog: one row per (accelerator, shape) fact, each citing its upstream source.

Every other module asks this one what a TPU slice or GPU node looks like on GKE (machine type,
node label, extended resource, hosts, chips per host) instead of hard-coding it, so a wrong fact
is fixed in one place. Rows are derived from small per-generation fact tables rather than
written out: TPU v4/v5p/tpu7x offer hundreds of topologies each.

Import cost matters (this sits on the CLI's cold-start path): only the standard library and
`jaxinfra.errors` are imported, and the full row set is built on first use and cached.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from math import prod
from typing import Any, NamedTuple

from jaxinfra.errors import CatalogError, Problem
from jaxinfra.upstream import GPU_RESOURCE, TPU_RESOURCE


@dataclass(frozen=True, slots=True)
class Accelerator:
    """One catalog row: a TPU slice shape, a GPU node shape, or the CPU placeholder."""

    name: str
    kind: str
    family: str
    topology: str | None
    chips: int
    hosts: int
    chips_per_host: int
    machine_type: str | None
    gke_accelerator: str | None
    resource: str | None
    aliases: tuple[str, ...]
    source: str

    @property
    def multi_host(self) -> bool:
        """True when the slice spans several VMs: that is what needs a JobSet + headless service."""
        return self.hosts > 1

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready view, for machine-readable CLI output and snapshot tests."""
        return {
            "name": self.name,
            "kind": self.kind,
            "family": self.family,
            "topology": self.topology,
            "chips": self.chips,
            "hosts": self.hosts,
            "chips_per_host": self.chips_per_host,
            "machine_type": self.machine_type,
            "gke_accelerator": self.gke_accelerator,
            "resource": self.resource,
            "aliases": list(self.aliases),
            "source": self.source,
        }


# --------------------------------------------------------------------------------------------
# Sources. Facts (names, numbers) were checked against these; nothing else was taken from them.
# --------------------------------------------------------------------------------------------

_XPK_COMMIT = "367c838253bea41e7d7716145ad6513f44c1a21e"
XPK_SOURCE = f"https://github.com/AI-Hypercomputer/xpk/blob/{_XPK_COMMIT}/src/xpk/core/system_characteristics.py"
_GKE_PLAN_TPUS = "https://cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus"
_TPU_V5E_DOC = "https://cloud.google.com/tpu/docs/v5e"
_TPU_V6E_DOC = "https://cloud.google.com/tpu/docs/v6e"
_GCE_GPU_MACHINES = "https://cloud.google.com/compute/docs/accelerator-optimized-machines"
_GKE_GPUS = "https://cloud.google.com/kubernetes-engine/docs/concepts/gpus"

_SRC_XPK = XPK_SOURCE
_SRC_V5E_SINGLE = f"{_TPU_V5E_DOC} ; {_GKE_PLAN_TPUS}"
_SRC_V6E_SINGLE = f"{_TPU_V6E_DOC} ; {_GKE_PLAN_TPUS}"
_SRC_GCE_GPU = f"{_GCE_GPU_MACHINES} ; {_GKE_GPUS}"
_SRC_CPU = "jaxinfra convention: a CPU-only pod requests no accelerator, node label or resource"


# --------------------------------------------------------------------------------------------
# TPU facts, per generation.
# --------------------------------------------------------------------------------------------


class _Grid(NamedTuple):
    """A 3-D topology family as upstream enumerates it.

    The four small shapes 2x2x1, 2x2x2, 2x2x4, 2x4x4, plus every AxBxC with A, B, C multiples of
    4 in 4..256 and (A/4)(B/4)(C/4) <= max_cubes; `nondecreasing` additionally requires
    A <= B <= C (v4 also accepts the permutations).
    """

    max_cubes: int
    nondecreasing: bool = True


class _Pool(NamedTuple):
    """Topologies served by one machine type; chips per host is read off the "-<n>t" suffix."""

    machine_type: str
    topologies: tuple[str, ...] | _Grid
    source: str


class _Generation(NamedTuple):
    family: str
    gke_accelerator: str
    # The -N slice names count TensorCores: 2 per chip on v4, v5p and tpu7x, 1 on v5e and v6e.
    cores_per_chip: int
    # Prefixes of the "<prefix>-<N>" slice names; prefixes other than `family` also get a
    # "<prefix>-<topology>" alias (xpk's "v5litepod-2x4").
    prefixes: tuple[str, ...]
    pools: tuple[_Pool, ...]
    # Extra single-host shapes that duplicate a canonical multi-host topology; named
    # "<family>-<topology>-1host" and given no aliases, so the canonical row keeps the -N name.
    single_host_variants: tuple[_Pool, ...] = ()
    # When several topologies have the same chip count, the "-N" name means this one (upstream's
    # default topologies); otherwise it means the first topology in upstream's enumeration order.
    preferred: str = ""


_V5P_PREFERRED = """
2x2x1 2x2x2 2x2x4 2x4x4 4x4x4 4x4x8 4x4x12 4x4x20 4x4x28 4x4x44 4x4x52 4x4x68 4x4x76 4x4x92
4x4x116 4x4x124 4x4x148 4x4x164 4x4x172 4x4x188 4x4x212 4x4x236 4x4x244 4x8x8 4x8x12 4x8x20
4x8x28 4x8x44 4x8x52 4x8x68 4x8x76 4x8x92 4x8x116 4x8x124 4x8x148 4x8x164 4x8x172 4x8x188
4x12x12 4x12x20 4x12x28 4x12x44 4x12x52 4x12x68 4x12x76 4x12x92 4x12x116 4x12x124 4x20x20
4x20x28 4x20x44 4x20x52 4x20x68 4x20x76 4x28x28 4x28x44 4x28x52 8x8x8 8x8x12 8x8x16 8x8x20
8x8x28 8x8x44 8x8x52 8x8x68 8x8x76 8x8x92 8x12x12 8x12x16 8x12x20 8x12x28 8x12x44 8x12x52
8x16x16 8x16x20 8x16x28 8x16x44 8x20x20 8x20x28 12x12x12 12x12x16 12x12x20 12x12x24 12x12x28
12x12x36 12x16x16 12x16x20 12x16x24 12x16x28 12x20x20 12x20x24 12x24x24 16x16x16 16x16x20
16x16x24 16x20x28
"""

# The v5e / v6e 2-D shapes GKE runs as multi-host slices of 4-chip VMs (2x4 = 2 hosts).
_2D_MULTI_HOST = ("2x4", "4x4", "4x8", "8x8", "8x16", "16x16")

# Ordered as rows() lists them.
_GENERATIONS: tuple[_Generation, ...] = (
    _Generation(
        family="v4",
        gke_accelerator="tpu-v4-podslice",
        cores_per_chip=2,
        prefixes=("v4",),
        pools=(_Pool("ct4p-hightpu-4t", _Grid(max_cubes=64, nondecreasing=False), _SRC_XPK),),
        preferred="2x2x1 2x2x2 2x2x4 2x4x4 4x4x4 4x4x8 4x8x8 8x8x8 8x8x12 8x8x16 8x16x16",
    ),
    _Generation(
        family="v5e",
        gke_accelerator="tpu-v5-lite-podslice",
        cores_per_chip=1,
        prefixes=("v5litepod", "v5e"),
        pools=(
            _Pool("ct5lp-hightpu-1t", ("1x1",), _SRC_V5E_SINGLE),
            _Pool("ct5lp-hightpu-4t", ("2x2",), _SRC_V5E_SINGLE),
            # docs/design.md, "Accelerators", and xpk: 2x4 is canonically 2 hosts x 4 chips.
            _Pool("ct5lp-hightpu-4t", _2D_MULTI_HOST, _SRC_XPK),
        ),
        single_host_variants=(_Pool("ct5lp-hightpu-8t", ("2x4",), _SRC_V5E_SINGLE),),
    ),
    _Generation(
        family="v5p",
        gke_accelerator="tpu-v5p-slice",
        cores_per_chip=2,
        prefixes=("v5p",),
        pools=(_Pool("ct5p-hightpu-4t", _Grid(max_cubes=140), _SRC_XPK),),
        preferred=_V5P_PREFERRED,
    ),
    _Generation(
        family="v6e",
        gke_accelerator="tpu-v6e-slice",
        cores_per_chip=1,
        prefixes=("v6e",),
        pools=(
            _Pool("ct6e-standard-1t", ("1x1",), _SRC_XPK),
            # docs/design.md, "Accelerators", and xpk: 2x4 is canonically 2 hosts x 4 chips.
            _Pool("ct6e-standard-4t", ("2x2", *_2D_MULTI_HOST), _SRC_XPK),
        ),
        single_host_variants=(_Pool("ct6e-standard-8t", ("2x4",), _SRC_V6E_SINGLE),),
    ),
    _Generation(
        family="tpu7x",
        gke_accelerator="tpu7x",
        cores_per_chip=2,
        prefixes=("tpu7x",),
        pools=(
            _Pool("tpu7x-standard-1t", ("1x1x1",), _SRC_XPK),
            _Pool("tpu7x-standard-4t", _Grid(max_cubes=144), _SRC_XPK),
        ),
        preferred=_V5P_PREFERRED + " 16x16x32 16x24x24",
    ),
)

# Other spellings accepted by tpu(); the marketing names are what users type first.
GENERATION_ALIASES: dict[str, str] = {
    "v5litepod": "v5e",
    "trillium": "v6e",
    "ironwood": "tpu7x",
}


# --------------------------------------------------------------------------------------------
# GPU facts, per GPU type. A GPU row describes ONE node (hosts = 1).
# --------------------------------------------------------------------------------------------


class _GpuType(NamedTuple):
    family: str
    gke_accelerator: str
    # (GPUs per node, machine type, source) for every machine of this type GKE can run.
    machines: tuple[tuple[int, str, str], ...]
    # Short family names accepted by gpu(); each also yields "<alias>-<count>" row aliases.
    aliases: tuple[str, ...] = ()


_GPU_TYPES: tuple[_GpuType, ...] = (
    # g2-standard-4/8/12/16/32 all carry one L4; xpk's l4-1 is g2-standard-12, so that is ours.
    _GpuType(
        "l4",
        "nvidia-l4",
        (
            (1, "g2-standard-12", _SRC_XPK),
            (2, "g2-standard-24", _SRC_XPK),
            (4, "g2-standard-48", _SRC_XPK),
            (8, "g2-standard-96", _SRC_XPK),
        ),
    ),
    _GpuType(
        "a100-40gb",
        "nvidia-tesla-a100",
        (
            (1, "a2-highgpu-1g", _SRC_XPK),
            (2, "a2-highgpu-2g", _SRC_XPK),
            (4, "a2-highgpu-4g", _SRC_XPK),
            (8, "a2-highgpu-8g", _SRC_XPK),
            (16, "a2-megagpu-16g", _SRC_GCE_GPU),
        ),
        aliases=("a100",),
    ),
    _GpuType(
        "a100-80gb",
        "nvidia-a100-80gb",
        (
            (1, "a2-ultragpu-1g", _SRC_GCE_GPU),
            (2, "a2-ultragpu-2g", _SRC_GCE_GPU),
            (4, "a2-ultragpu-4g", _SRC_GCE_GPU),
            (8, "a2-ultragpu-8g", _SRC_GCE_GPU),
        ),
    ),
    # a3-highgpu-1g/2g/4g: GKE offers them only with Spot or flex-start provisioning.
    _GpuType(
        "h100-80gb",
        "nvidia-h100-80gb",
        (
            (1, "a3-highgpu-1g", _SRC_GCE_GPU),
            (2, "a3-highgpu-2g", _SRC_GCE_GPU),
            (4, "a3-highgpu-4g", _SRC_GCE_GPU),
            (8, "a3-highgpu-8g", _SRC_XPK),
        ),
        aliases=("h100",),
    ),
    _GpuType(
        "h100-mega-80gb",
        "nvidia-h100-mega-80gb",
        ((8, "a3-megagpu-8g", _SRC_XPK),),
        aliases=("h100-mega",),
    ),
    _GpuType(
        "h200-141gb",
        "nvidia-h200-141gb",
        ((8, "a3-ultragpu-8g", _SRC_XPK),),
        aliases=("h200",),
    ),
    _GpuType("b200", "nvidia-b200", ((8, "a4-highgpu-8g", _SRC_XPK),)),
)


# --------------------------------------------------------------------------------------------
# Derivation.
# --------------------------------------------------------------------------------------------


def _dims(topology: str) -> tuple[int, ...]:
    return tuple(int(d) for d in topology.split("x"))


def _chips_per_host(machine_type: str) -> int:
    """TPU machine types name their chip count: ct5p-hightpu-4t has 4, ct6e-standard-8t has 8."""
    return int(machine_type.rsplit("-", 1)[1].removesuffix("t"))


def _expand(topologies: tuple[str, ...] | _Grid) -> tuple[str, ...]:
    if not isinstance(topologies, _Grid):
        return topologies
    out = ["2x2x1", "2x2x2", "2x2x4", "2x4x4"]
    limit = topologies.max_cubes
    for a in range(1, 65):  # sides 4..256, counted in 4-chip cube edges
        for b in range(a if topologies.nondecreasing else 1, 65):
            if a * b > limit:
                break
            for c in range(b if topologies.nondecreasing else 1, min(64, limit // (a * b)) + 1):
                out.append(f"{4 * a}x{4 * b}x{4 * c}")
    return tuple(out)


def _tpu_row(gen: _Generation, name: str, topology: str, pool: _Pool, aliases: tuple[str, ...]) -> Accelerator:
    chips = prod(_dims(topology))
    per_host = _chips_per_host(pool.machine_type)
    if chips % per_host:
        raise AssertionError(f"{gen.family}-{topology} does not fill {pool.machine_type} VMs")
    return Accelerator(
        name=name,
        kind="tpu",
        family=gen.family,
        topology=topology,
        chips=chips,
        hosts=chips // per_host,
        chips_per_host=per_host,
        machine_type=pool.machine_type,
        gke_accelerator=gen.gke_accelerator,
        resource=TPU_RESOURCE,
        aliases=aliases,
        source=pool.source,
    )


def _tpu_rows(gen: _Generation) -> list[Accelerator]:
    """Canonical rows named "<family>-<topology>", then the "-1host" variants."""
    shapes = [(t, pool) for pool in gen.pools for t in _expand(pool.topologies)]
    preferred = set(gen.preferred.split())
    owner: dict[int, str] = {}  # chip count -> topology that the "-N" names mean
    for topology, _ in shapes:
        chips = prod(_dims(topology))
        held = owner.get(chips)
        if held is None or (topology in preferred and held not in preferred):
            owner[chips] = topology
    rows = []
    for topology, pool in shapes:
        chips = prod(_dims(topology))
        aliases: list[str] = [f"{p}-{topology}" for p in gen.prefixes if p != gen.family]
        if owner[chips] == topology:
            aliases += [f"{p}-{chips * gen.cores_per_chip}" for p in gen.prefixes]
        rows.append(_tpu_row(gen, f"{gen.family}-{topology}", topology, pool, tuple(aliases)))
    for pool in gen.single_host_variants:
        for topology in _expand(pool.topologies):
            rows.append(_tpu_row(gen, f"{gen.family}-{topology}-1host", topology, pool, ()))
    return rows


def _gpu_rows(gpu_type: _GpuType) -> list[Accelerator]:
    return [
        Accelerator(
            name=f"{gpu_type.family}-{count}",
            kind="gpu",
            family=gpu_type.family,
            topology=None,
            chips=count,
            hosts=1,
            chips_per_host=count,
            machine_type=machine_type,
            gke_accelerator=gpu_type.gke_accelerator,
            resource=GPU_RESOURCE,
            aliases=tuple(f"{a}-{count}" for a in gpu_type.aliases),
            source=source,
        )
        for count, machine_type, source in gpu_type.machines
    ]


_CPU = Accelerator(
    name="cpu",
    kind="cpu",
    family="cpu",
    topology=None,
    chips=1,
    hosts=1,
    chips_per_host=1,
    machine_type=None,
    gke_accelerator=None,
    resource=None,
    aliases=(),
    source=_SRC_CPU,
)


@cache
def rows() -> tuple[Accelerator, ...]:
    """Every row: TPUs by generation, chips, topology; then GPUs by type and count; then cpu."""
    out: list[Accelerator] = []
    for gen in _GENERATIONS:
        out += sorted(_tpu_rows(gen), key=lambda r: (r.chips, _dims(r.topology or ""), r.name))
    for gpu_type in _GPU_TYPES:
        out += _gpu_rows(gpu_type)
    out.append(_CPU)
    return tuple(out)


@cache
def _by_name() -> dict[str, Accelerator]:
    """Canonical names and aliases -> row; a clash is a catalog bug, so fail loudly."""
    index: dict[str, Accelerator] = {}
    for row in rows():
        for key in (row.name, *row.aliases):
            if key in index:
                raise AssertionError(f"{key!r} names both {index[key].name} and {row.name}")
            index[key] = row
    return index


@cache
def _tpu_index(family: str) -> dict[str, Accelerator]:
    """topology -> canonical row of one generation (no "-1host" variants); built per
    generation, so a lookup does not pay for the whole catalog."""
    gen = next(g for g in _GENERATIONS if g.family == family)
    return {r.topology or "": r for r in _tpu_rows(gen) if not r.name.endswith("-1host")}


# --------------------------------------------------------------------------------------------
# Lookups.
# --------------------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return str(text).strip().lower()


def _close(word: str, choices: Iterable[str], n: int = 5) -> list[str]:
    import difflib  # only on the error path: keeps `import jaxinfra.catalog` cheap

    return difflib.get_close_matches(word, list(choices), n=n, cutoff=0.5)


def _generation(generation: str) -> str:
    key = _norm(generation)
    key = GENERATION_ALIASES.get(key, key)
    known = [g.family for g in _GENERATIONS]
    if key in known:
        return key
    close = _close(key, [*known, *GENERATION_ALIASES])
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise CatalogError(
        [
            Problem(
                path="generation",
                value=generation,
                message="unknown TPU generation",
                fix=f"{hint}TPU generations: {', '.join(known)}",
            )
        ]
    )


def tpu(generation: str, topology: str) -> Accelerator:
    """The canonical row for a TPU slice, e.g. tpu("v5p", "2x2x4")."""
    family = _generation(generation)
    shapes = _tpu_index(family)
    key = _norm(topology).replace(" ", "")
    if key in shapes:
        return shapes[key]
    # Same chip count first (a transposed "4x2" is usually meant as "2x4"), then spelling.
    suggestions: list[str] = []
    try:
        chips = prod(_dims(key))
        suggestions = [t for t, r in shapes.items() if r.chips == chips][:3]
    except ValueError:
        pass
    suggestions += [t for t in _close(key, shapes) if t not in suggestions]
    if not suggestions:
        suggestions = list(shapes)[:5]
    raise CatalogError(
        [
            Problem(
                path="topology",
                value=topology,
                message=f"not a {family} topology GKE supports",
                fix=f"closest valid {family} topologies: {', '.join(suggestions[:5])}",
            )
        ]
    )


def _gpu_type(type: str) -> _GpuType:
    key = _norm(type)
    for gpu_type in _GPU_TYPES:
        if key in (gpu_type.family, gpu_type.gke_accelerator, *gpu_type.aliases):
            return gpu_type
    names = [n for t in _GPU_TYPES for n in (t.family, *t.aliases)]
    close = _close(key, names + [t.gke_accelerator for t in _GPU_TYPES])
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise CatalogError(
        [
            Problem(
                path="type",
                value=type,
                message="unknown GPU type",
                fix=f"{hint}GPU types: {', '.join(t.family for t in _GPU_TYPES)}",
            )
        ]
    )


def gpu(type: str, count: int) -> Accelerator:
    """The row for one GPU node of `type` with exactly `count` GPUs, e.g. gpu("l4", 2).

    `type` may be the family ("h100-80gb"), a short alias ("h100" -> h100-80gb, "a100" ->
    a100-40gb, "h200" -> h200-141gb, "h100-mega" -> h100-mega-80gb) or the GKE label value
    ("nvidia-h100-80gb").
    """
    gpu_type = _gpu_type(type)
    counts = [c for c, _, _ in gpu_type.machines]
    if isinstance(count, int) and not isinstance(count, bool) and count in counts:
        return _by_name()[f"{gpu_type.family}-{count}"]
    valid = ", ".join(map(str, counts))
    whole = isinstance(count, int) and not isinstance(count, bool)
    if whole and count > max(counts):
        message = f"more GPUs than one {gpu_type.family} node has (max {max(counts)} per node)"
        fix = f"use {valid} GPUs per node, and more nodes for more GPUs"
    elif not whole or count < 1:
        message = "GPU count must be a whole number of at least 1"
        fix = f"use one of {valid} GPUs per node"
    else:
        message = f"no {gpu_type.family} machine has exactly {count} GPUs"
        fix = f"use one of {valid} GPUs per node (max {max(counts)})"
    raise CatalogError([Problem(path="count", value=count, message=message, fix=fix)])


def cpu() -> Accelerator:
    """The CPU-only row (no accelerator): for smoke tests and the local simulator."""
    return _CPU


def resolve(name: str) -> Accelerator:
    """Case-insensitive lookup by canonical name or alias: "v5p-16", "v5e-8", "h100-80gb-8"."""
    key = _norm(name)
    found = _by_name().get(key)
    if found is not None:
        return found
    close = _close(key, _by_name())
    fix = f"did you mean {', '.join(close)}?" if close else "names look like v5p-2x2x4, v5p-16, v5e-8, h100-80gb-8, cpu"
    raise CatalogError([Problem(path="name", value=name, message="unknown accelerator", fix=fix)])


def search(text: str | None) -> tuple[Accelerator, ...]:
    """Rows whose name, alias, family, machine type or GKE accelerator contains `text`."""
    if text is None:
        return rows()
    needle = _norm(text)

    def fields(r: Accelerator) -> tuple[str, ...]:
        return (r.name, *r.aliases, r.family, r.machine_type or "", r.gke_accelerator or "")

    return tuple(r for r in rows() if any(needle in f for f in fields(r)))


__all__ = [
    "Accelerator",
    "GENERATION_ALIASES",
    "XPK_SOURCE",
    "cpu",
    "gpu",
    "resolve",
    "rows",
    "search",
    "tpu",
]
