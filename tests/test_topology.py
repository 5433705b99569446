"""The topology picture (`jaxinfra explain --svg`): valid XML, the same bytes everywhere, every host
accounted for (drawn one by one up to the collapse size, counted in a range past it), and seen in Chromium."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from jaxinfra import CPU, TPU, Cluster, JaxJob, NodePool, stack
from jaxinfra.explain import layout
from jaxinfra.plan import plan
from jaxinfra.topology import HOST_COLLAPSE, SLICE_COLLAPSE, svg
from tests.support.headless import Browser
from tests.support.paths import ROOT

pytestmark = pytest.mark.browser

NS = {"svg": "http://www.w3.org/2000/svg"}
HUGE = ROOT / "benchmarks" / "stacks" / "v5p_16x16x24_x4.py"
V5P = ROOT / "stacks" / "tpu_v5p_2x2x4_x2.py"


def cpu_job(nodes: int) -> Cluster:
    return Cluster(
        name="c",
        node_pools=[NodePool("cpu", CPU(devices=2))],
        jobs=[JaxJob("train", image="img", node_pool="cpu", nodes=nodes)],
    )


def tpu_job(topology: str, slices: int) -> Cluster:
    return Cluster(
        name="t",
        node_pools=[NodePool("tpu", TPU("v5p", topology))],
        jobs=[JaxJob("train", image="img", node_pool="tpu", slices=slices)],
    )


def drawn(cluster: Cluster) -> tuple[ET.Element, str]:
    text = svg([layout(jp) for jp in plan(cluster).jobs])
    return ET.fromstring(text), text


def accounted(root: ET.Element) -> tuple[list[int], int]:
    """The ranks drawn as hosts, and the hosts that ranges stand for (read from their own labels)."""
    ranks = [int(g.get("data-rank")) for g in root.iterfind(".//svg:g[@class='host']", NS)]
    in_ranges = 0
    for g in root.iterfind(".//svg:g[@class='host-range']", NS):
        in_ranges += int(re.match(r"(\d+) hosts", g.find("svg:text", NS).text).group(1))
    for g in root.iterfind(".//svg:g[@class='slice-range']", NS):
        in_ranges += int(re.search(r"(\d+) hosts", g.find("svg:text", NS).text).group(1))
    return ranks, in_ranges


@pytest.mark.parametrize(
    "cluster",
    [cpu_job(1), cpu_job(8), cpu_job(HOST_COLLAPSE), tpu_job("2x2x4", 2), tpu_job("2x2x4", SLICE_COLLAPSE)],
    ids=lambda c: str(c.jobs[0].nodes or c.jobs[0].slices),
)
def test_one_element_per_host_up_to_the_collapse_size(cluster: Cluster) -> None:
    root, _ = drawn(cluster)
    jp = plan(cluster).jobs[0]
    ranks, in_ranges = accounted(root)
    assert ranks == list(range(jp.processes)) and in_ranges == 0
    names = [t.text for g in root.iterfind(".//svg:g[@class='host']", NS) for t in g.iterfind("svg:text", NS)][::2]
    assert names == [jp.hostname(r) for r in range(jp.processes)]
    first = root.find(".//svg:g[@class='host']", NS)
    assert len(first.findall("svg:rect[@class='device']", NS)) == jp.devices_per_process
    coordinator = root.find(".//svg:g[@data-rank='0']/svg:title", NS).text
    assert coordinator == f"{jp.hostname(0)}: rank 0, coordinator"


@pytest.mark.parametrize(
    "cluster",
    [cpu_job(HOST_COLLAPSE + 1), cpu_job(1000), tpu_job("4x4x8", SLICE_COLLAPSE + 1), stack.load(HUGE)],
    ids=["33", "1000", "5x32", "6144"],
)
def test_past_the_collapse_size_ranges_count_every_host(cluster: Cluster) -> None:
    root, text = drawn(cluster)
    jp = plan(cluster).jobs[0]
    ranks, in_ranges = accounted(root)
    assert len(ranks) + in_ranges == jp.processes  # every host once: drawn, or counted in a range
    assert len(set(ranks)) == len(ranks) and {0, jp.processes - 1} <= set(ranks)
    assert len(ranks) <= SLICE_COLLAPSE * HOST_COLLAPSE and len(text) < 100_000


def test_bytes_are_the_same_across_runs_and_hash_seeds(tmp_path: Path) -> None:
    outputs = []
    for seed in ("0", "1", "4242"):
        out = tmp_path / f"{seed}.svg"
        r = subprocess.run(
            [sys.executable, "-m", "jaxinfra", "explain", str(V5P), str(HUGE), "--svg", str(out)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    assert outputs[0].decode() == svg([layout(jp) for p in (V5P, HUGE) for jp in plan(stack.load(p)).jobs])


def test_self_contained() -> None:
    _, text = drawn(stack.load(V5P))
    assert not re.search(r"<script|href|url\(|@import|@font-face|https?://(?!www\.w3\.org/2000/svg\")", text)


def test_chromium_draws_it(tmp_path: Path) -> None:
    root, text = drawn(stack.load(V5P))
    path = tmp_path / "topology.svg"
    path.write_text(text)
    with Browser() as browser:
        page = browser.page()
        page.goto(path.as_uri())
        assert page.evaluate("document.querySelectorAll('g.host').length") == len(accounted(root)[0]) == 8
        ink = browser.page().ink(page.screenshot(full_page=False))
        assert page.console(("error", "warning")) == []
    assert ink["inked"] > 0.02 * ink["width"] * ink["height"] and ink["colours"] > 10
