"""Behavioural tests for the accelerator catalog: shapes add up, names are unique, lookups and
their error messages say what a user needs to fix the input."""

from __future__ import annotations

import json
from math import prod

import pytest

from jaxinfra import catalog, upstream
from jaxinfra.catalog import Accelerator
from jaxinfra.errors import CatalogError

pytestmark = pytest.mark.unit


def _problem(exc: pytest.ExceptionInfo[CatalogError]):
    (problem,) = exc.value.problems
    return problem


# --- shape invariants -------------------------------------------------------------------------


def test_every_tpu_row_adds_up():
    tpus = [r for r in catalog.rows() if r.kind == "tpu"]
    assert tpus
    for r in tpus:
        assert r.topology is not None
        dims = [int(d) for d in r.topology.split("x")]
        assert r.hosts * r.chips_per_host == r.chips == prod(dims), r
        assert r.machine_type and r.machine_type.endswith(f"-{r.chips_per_host}t"), r
        assert r.resource == upstream.TPU_RESOURCE
        assert r.gke_accelerator


def test_gpu_and_cpu_rows_describe_one_node():
    for r in catalog.rows():
        if r.kind == "gpu":
            assert (r.hosts, r.chips_per_host, r.topology) == (1, r.chips, None), r
            assert r.resource == upstream.GPU_RESOURCE
            assert r.gke_accelerator and r.gke_accelerator.startswith("nvidia-")
            assert r.name == f"{r.family}-{r.chips}"
    c = catalog.cpu()
    assert (c.name, c.kind, c.chips, c.hosts, c.chips_per_host) == ("cpu", "cpu", 1, 1, 1)
    assert (c.machine_type, c.gke_accelerator, c.resource, c.topology) == (None, None, None, None)


def test_names_and_aliases_are_unique_and_lower_case():
    seen: dict[str, str] = {}
    for r in catalog.rows():
        for key in (r.name, *r.aliases):
            assert key == key.lower()
            assert key not in seen, f"{key} used by {seen[key]} and {r.name}"
            seen[key] = r.name


def test_every_row_cites_a_source():
    for r in catalog.rows():
        assert r.source.strip(), r.name


def test_rows_are_deterministic_and_ordered():
    rs = catalog.rows()
    assert rs == catalog.rows()
    kinds = [r.kind for r in rs]
    assert kinds == sorted(kinds, key=["tpu", "gpu", "cpu"].index)
    assert rs[-1].name == "cpu"
    gens = list(dict.fromkeys(r.family for r in rs if r.kind == "tpu"))
    assert gens == ["v4", "v5e", "v5p", "v6e", "tpu7x"]
    for gen in gens:
        chips = [r.chips for r in rs if r.family == gen]
        assert chips == sorted(chips)


# --- facts ------------------------------------------------------------------------------------


def test_v5p_largest_slice():
    r = catalog.tpu("v5p", "16x16x24")
    assert (r.chips, r.hosts, r.chips_per_host) == (6144, 1536, 4)
    assert r.multi_host
    assert r.machine_type == "ct5p-hightpu-4t"
    assert r.gke_accelerator == "tpu-v5p-slice"


def test_v5e_single_vs_multi_host():
    assert not catalog.tpu("v5e", "2x2").multi_host
    assert not catalog.tpu("v5e", "1x1").multi_host
    two_by_four = catalog.tpu("v5e", "2x4")
    assert two_by_four.multi_host
    assert (two_by_four.hosts, two_by_four.chips_per_host) == (2, 4)
    assert catalog.tpu("v5e", "1x1").machine_type == "ct5lp-hightpu-1t"
    assert catalog.tpu("v5e", "2x2").machine_type == "ct5lp-hightpu-4t"


def test_single_host_8_chip_variants_are_distinct_rows():
    for gen, machine in (("v5e", "ct5lp-hightpu-8t"), ("v6e", "ct6e-standard-8t")):
        r = catalog.resolve(f"{gen}-2x4-1host")
        assert (r.hosts, r.chips_per_host, r.machine_type, r.aliases) == (1, 8, machine, ())
        assert catalog.tpu(gen, "2x4").hosts == 2


def test_tensorcore_and_chip_counting_aliases():
    assert catalog.resolve("v5p-16") == catalog.tpu("v5p", "2x2x2")
    assert catalog.resolve("v4-8") == catalog.tpu("v4", "2x2x1")
    assert catalog.resolve("v6e-256") == catalog.tpu("v6e", "16x16")
    assert catalog.resolve("tpu7x-8") == catalog.tpu("tpu7x", "2x2x1")
    assert catalog.resolve("v5litepod-8") == catalog.resolve("v5e-8") == catalog.tpu("v5e", "2x4")
    assert catalog.resolve("v5litepod-16x16") == catalog.tpu("v5e", "16x16")


def test_shared_chip_counts_mean_the_upstream_default_topology():
    # 4x4x16 and 4x8x8 both have 256 chips; the -512 name means the cube-like one.
    assert catalog.resolve("v5p-512").topology == "4x8x8"
    assert catalog.resolve("v4-1024").topology == "8x8x8"
    assert "v4-512" not in catalog.tpu("v4", "4x4x16").aliases


def test_v4_accepts_permuted_topologies_v5p_does_not():
    assert catalog.tpu("v4", "8x4x4").chips == 128
    with pytest.raises(CatalogError) as exc:
        catalog.tpu("v5p", "8x4x4")
    assert "4x4x8" in _problem(exc).fix


def test_gpu_machine_types():
    assert catalog.gpu("l4", 2).machine_type == "g2-standard-24"
    assert catalog.gpu("l4", 8).machine_type == "g2-standard-96"
    assert catalog.gpu("a100-40gb", 16).machine_type == "a2-megagpu-16g"
    assert catalog.gpu("h100-80gb", 8).machine_type == "a3-highgpu-8g"
    assert catalog.gpu("h100-mega-80gb", 8).gke_accelerator == "nvidia-h100-mega-80gb"
    assert catalog.gpu("h200-141gb", 8).machine_type == "a3-ultragpu-8g"
    assert catalog.gpu("b200", 8).machine_type == "a4-highgpu-8g"


def test_gpu_family_aliases():
    assert catalog.gpu("H100", 8) == catalog.resolve("h100-80gb-8") == catalog.resolve("h100-8")
    assert catalog.gpu("a100", 8).family == "a100-40gb"
    assert catalog.gpu("h200", 8).family == "h200-141gb"
    assert catalog.gpu("nvidia-l4", 1).family == "l4"


# --- lookups and errors -------------------------------------------------------------------------


def test_resolve_is_case_insensitive():
    expected = catalog.tpu("v5p", "2x2x2")
    assert catalog.resolve("V5P-2X2X2") == catalog.resolve(" v5p-16 ") == expected
    assert catalog.resolve("CPU") is catalog.cpu()


def test_resolve_unknown_lists_close_matches():
    with pytest.raises(CatalogError) as exc:
        catalog.resolve("v5p-17")
    p = _problem(exc)
    assert p.path == "name" and p.value == "v5p-17"
    assert "v5p-16" in p.fix


def test_tpu_unknown_generation_lists_generations():
    with pytest.raises(CatalogError) as exc:
        catalog.tpu("v5", "2x2")
    p = _problem(exc)
    assert p.path == "generation"
    for gen in ("v4", "v5e", "v5p", "v6e", "tpu7x"):
        assert gen in p.fix


def test_tpu_invalid_topology_names_valid_ones():
    with pytest.raises(CatalogError) as exc:
        catalog.tpu("v5e", "2x3")
    p = _problem(exc)
    assert p.path == "topology" and p.value == "2x3"
    assert "2x4" in p.fix or "2x2" in p.fix
    assert "v5e" in p.message


def test_tpu_generation_aliases():
    assert catalog.tpu("v5litepod", "4x4") == catalog.tpu("V5E", "4x4")
    assert catalog.tpu("trillium", "2x2").family == "v6e"


def test_gpu_too_many_says_max():
    with pytest.raises(CatalogError) as exc:
        catalog.gpu("h100-80gb", 16)
    p = _problem(exc)
    assert p.path == "count"
    assert "max 8" in p.message and "more GPUs than" in p.message


def test_gpu_count_no_machine_has():
    with pytest.raises(CatalogError) as exc:
        catalog.gpu("l4", 3)
    assert "1, 2, 4, 8" in _problem(exc).fix


@pytest.mark.parametrize("count", [0, -8, True, 2.0])
def test_gpu_count_must_be_a_positive_whole_number(count):
    with pytest.raises(CatalogError) as exc:
        catalog.gpu("l4", count)
    assert _problem(exc).path == "count"


def test_gpu_unknown_type():
    with pytest.raises(CatalogError) as exc:
        catalog.gpu("h1000", 8)
    p = _problem(exc)
    assert p.path == "type" and "h100" in p.fix


def test_search():
    assert catalog.search(None) == catalog.rows()
    assert {r.name for r in catalog.search("ULTRAGPU")} == {
        "a100-80gb-1",
        "a100-80gb-2",
        "a100-80gb-4",
        "a100-80gb-8",
        "h200-141gb-8",
    }
    assert catalog.resolve("v5p-16") in catalog.search("v5p-16")
    assert all(r.family == "v6e" for r in catalog.search("tpu-v6e"))


def test_as_dict_is_json_ready():
    d = catalog.tpu("v6e", "4x4").as_dict()
    keys = ("name", "kind", "topology", "chips", "hosts", "chips_per_host", "machine_type")
    for key in (*keys, "gke_accelerator", "resource", "source"):
        assert key in d
    assert d["aliases"] == ["v6e-16"]
    assert json.loads(json.dumps(d)) == d


def test_rows_are_immutable():
    r = catalog.cpu()
    assert isinstance(r, Accelerator)
    with pytest.raises(AttributeError):
        r.chips = 2  # type: ignore[misc]
