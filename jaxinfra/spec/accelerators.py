"""What a node pool's nodes carry: a TPU slice type, GPUs or CPUs, each checked against the catalog."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from jaxinfra import catalog, gpudirect
from jaxinfra.errors import CatalogError
from jaxinfra.gpudirect import Network
from jaxinfra.spec.base import TAG, Spec, tagged
from jaxinfra.spec.problems import problem


def _catalog_problem(err: CatalogError, field: str | None = None) -> PydanticCustomError:
    """The catalog's problem, located at `field` (or the catalog's own field name)."""
    p = err.problems[0]
    return problem(p.message, p.fix, field or p.path)


class TPU(Spec):
    """A TPU slice type: `TPU("v5p", "2x2x4")` or by alias, `TPU("v5p-32")`."""

    _positional = ("generation", "topology")
    kind: Literal["tpu"] = Field("tpu", description=TAG)
    generation: str = Field(description="TPU generation: v4, v5e, v5p, v6e, tpu7x (or an alias such as v5p-32).")
    topology: str | None = Field(None, description="Chip topology, e.g. 2x2x4; omit when `generation` is an alias.")

    @model_validator(mode="after")
    def _in_catalog(self) -> TPU:
        try:
            row = (
                catalog.resolve(self.generation)
                if self.topology is None
                else catalog.tpu(self.generation, self.topology)
            )
        except CatalogError as err:
            raise _catalog_problem(err, "generation" if self.topology is None else None) from None
        if row.kind != "tpu":
            raise problem(f"{row.name} is a {row.kind}, not a TPU", f"use {row.kind.upper()}(...)", "generation")
        if (row.family, row.topology) != (self.generation, self.topology):
            return TPU.model_validate({"generation": row.family, "topology": row.topology})
        return self

    @property
    def row(self) -> catalog.Accelerator:
        return catalog.tpu(self.generation, self.topology or "")


class GPU(Spec):
    """GPU nodes: `GPU("h100-80gb", 8)` is a node with 8 H100 80 GB GPUs."""

    _positional = ("type", "count")
    kind: Literal["gpu"] = Field("gpu", description=TAG)
    type: str = Field(
        description="GPU type, e.g. l4, a100-40gb, a100-80gb, h100-80gb, h100-mega-80gb, h200-141gb, b200."
    )
    count: int = Field(gt=0, description="GPUs per node (one JAX process per node uses all of them).")
    network: Network = Field(
        "auto",
        description="GPU-to-GPU network: auto, the fastest the machine type has on GKE (GPUDirect-TCPX on "
        "a3-highgpu-8g, GPUDirect-TCPXO on a3-megagpu-8g, GPUDirect RDMA on a3-ultragpu-8g and a4-highgpu-8g: "
        "`jaxinfra.gpudirect`), plain pod networking on others; standard: plain pod networking (one NIC) always.",
    )

    @model_validator(mode="after")
    def _in_catalog(self) -> GPU:
        try:
            row = catalog.gpu(self.type, self.count)
        except CatalogError as err:
            raise _catalog_problem(err) from None
        if row.family != self.type:
            return GPU.model_validate({"type": row.family, "count": self.count, "network": self.network})
        return self

    @property
    def row(self) -> catalog.Accelerator:
        return catalog.gpu(self.type, self.count)

    @property
    def gpudirect(self) -> gpudirect.Stack | None:
        """The GPUDirect stack these nodes get; None: plain pod networking."""
        return None if self.network == "standard" else gpudirect.for_machine(self.row.machine_type)


class CPU(Spec):
    """CPU-only nodes: each JAX process gets `devices` CPU devices (`JAX_NUM_CPU_DEVICES`)."""

    _positional = ("devices",)
    kind: Literal["cpu"] = Field("cpu", description=TAG)
    devices: int = Field(1, gt=0, le=1024, description="JAX CPU devices per process.")
    machine_type: str | None = Field(
        None,
        description="Optional machine type for a provisioned node pool; None: e2-standard-4 "
        "(`jaxinfra.pulumi.config.DEFAULT_CPU_MACHINE_TYPE`).",
    )

    @property
    def row(self) -> catalog.Accelerator:
        return catalog.cpu()


if TYPE_CHECKING:  # what the union holds, for the type checker; pydantic reads the tagged union below
    Accelerator: TypeAlias = TPU | GPU | CPU
else:
    Accelerator = tagged({"tpu": TPU, "gpu": GPU, "cpu": CPU}, "an accelerator", "use TPU(...), GPU(...) or CPU(...)")
