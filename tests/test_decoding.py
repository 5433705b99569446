"""Decoding manifests with the API server's bounds (jaxinfra.yamlio): the Kubernetes docs' examples
decode, hostile input is a list of problems (never a traceback, a minute of CPU or an OOM kill).

The alias budget is checked against an independent replay of goyaml's decoder (`goyaml_verdict`:
events, alias nodes kept, every node decoded in order, the test made at each one)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxinfra.errors import Problem
from jaxinfra.yamlio import (
    MAX_OBJECT_BYTES,
    MAX_REQUEST_BYTES,
    DecodeError,
    decode,
    load,
    read_documents,
    read_manifests,
)
from jaxinfra.yamlsurvey import allowed_alias_ratio, excessive_aliasing
from tests.support.paths import ROOT

pytestmark = pytest.mark.unit

JAXINFRA = Path(sys.executable).parent / "jaxinfra"

# The Job and ConfigMap of the Kubernetes docs (concepts/workloads/controllers/job, configuration/configmap).
JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: pi
spec:
  template:
    spec:
      containers:
      - name: pi
        image: perl:5.34.0
        command: ["perl",  "-Mbignum=bpi", "-wle", "print bpi(2000)"]
      restartPolicy: Never
  backoffLimit: 4
"""
CONFIG_MAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: game-demo
data:
  # property-like keys; each key maps to a simple value
  player_initial_lives: "3"
  ui_properties_file_name: "user-interface.properties"

  # file-like keys
  game.properties: |
    enemy.types=aliens,monsters
    player.maximum-lives=5
  user-interface.properties: |
    color.good=purple
    color.bad=yellow
    allow.textmode=true
"""


def bomb(levels: int = 9, width: int = 9) -> str:
    """The billion laughs: each list holds `width` aliases of the one before (width**levels "lol"s)."""
    lines = [
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        "  name: lol",
        "data:",
        "  l0: &l0 [" + ", ".join(['"lol"'] * width) + "]",
    ]
    lines += [f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, problems
    return problems[0]


# --- the docs' examples decode ---------------------------------------------------------------------


def test_the_docs_job_and_config_map_decode(tmp_path: Path) -> None:
    manifests, problems = read_manifests([write(tmp_path, "pi.yaml", JOB + "---\n" + CONFIG_MAP)])
    assert problems == []
    assert [(m["kind"], m["metadata"]["name"]) for m in manifests] == [("Job", "pi"), ("ConfigMap", "game-demo")]
    assert manifests[0]["spec"]["template"]["spec"]["containers"][0]["command"][-1] == "print bpi(2000)"
    assert manifests[1]["data"]["game.properties"].startswith("enemy.types=aliens")


def test_a_json_file_decodes_as_json(tmp_path: Path) -> None:
    """Tabs and a surrogate pair escape: valid JSON that YAML refuses; `1e3` a JSON number."""
    obj = yaml.safe_load(CONFIG_MAP)
    text = json.dumps(obj, indent="\t").replace('"3"', '"\\ud83d\\ude00"')[:-1] + ',\n\t"n": 1e3\n}\n'
    manifests, problems = read_manifests([write(tmp_path, "cm.json", text + json.dumps(yaml.safe_load(JOB)))])
    assert problems == []
    assert [m["kind"] for m in manifests] == ["ConfigMap", "Job"]
    assert manifests[0]["data"]["player_initial_lives"] == "\U0001f600" and manifests[0]["n"] == 1000.0


def test_a_yaml_flow_mapping_is_not_mistaken_for_json() -> None:
    docs, problems = decode("{apiVersion: v1, kind: Namespace, metadata: {name: x}}\n")
    assert problems == [] and docs[0].value["metadata"] == {"name": "x"}


def test_anchors_aliases_and_merge_keys_decode_into_copies() -> None:
    text = textwrap.dedent("""\
        apiVersion: batch/v1
        kind: Job
        metadata: {name: shared}
        spec:
          template:
            spec:
              restartPolicy: Never
              containers:
              - &worker {name: a, image: busybox, env: &env [{name: MODE, value: train}]}
              - <<: *worker
                name: b
                env: *env
        """)
    [job] = load(text)
    a, b = job["spec"]["template"]["spec"]["containers"]
    assert (a["name"], b["name"], b["image"], b["env"]) == ("a", "b", "busybox", a["env"])
    b["env"][0]["value"] = "eval"  # goyaml decodes each alias into its own copy; so does yamlio
    assert a["env"][0]["value"] == "train"


def test_empty_documents_keep_their_position() -> None:
    docs, problems = decode("---\n---\n---\n" + JOB)
    assert problems == [] and [(d.index, d.value is None) for d in docs] == [(0, True), (1, True), (2, False)]


# --- alias expansion: goyaml's budget ------------------------------------------------------------


def test_allowed_alias_ratio_is_goyamls() -> None:
    assert allowed_alias_ratio(1) == allowed_alias_ratio(400_000) == 0.99
    assert allowed_alias_ratio(4_000_000) == allowed_alias_ratio(10**9) == 0.10
    assert allowed_alias_ratio(2_200_000) == pytest.approx(0.99 - 0.89 / 2)
    assert not excessive_aliasing(1000, 999) and not excessive_aliasing(10_000, 100)  # both floors
    assert excessive_aliasing(1001, 1000) and not excessive_aliasing(1001, 990)


@pytest.mark.simulator
def test_the_billion_laughs_is_refused_in_a_moment_with_little_memory(tmp_path: Path) -> None:
    path = write(tmp_path, "bomb.yaml", bomb())
    plain = write(tmp_path, "plain.yaml", JOB)
    # VmHWM, not getrusage's ru_maxrss: Linux carries the latter over from the parent (a large pytest) through exec.
    # Time as a ratio to a plain manifest read in the same process (a moment: the bomb's expansion is a billion nodes)
    code = (
        "import re, sys, time\n"
        "from jaxinfra.yamlio import read_manifests\n"
        "read_manifests([sys.argv[2]])\n"
        "t0 = time.perf_counter(); read_manifests([sys.argv[2]]); t0 = time.perf_counter() - t0\n"
        "t = time.perf_counter(); manifests, problems = read_manifests([sys.argv[1]]); t = time.perf_counter() - t\n"
        "hwm = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
        "print(t / t0, hwm, len(manifests), len(problems))\n"
        "print(problems[0])\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(path), str(plain)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=True,
    )
    ratio, max_rss_kib, n_manifests, n_problems = run.stdout.splitlines()[0].split()
    assert float(ratio) < 1000 and int(max_rss_kib) < 100 * 1024
    assert (n_manifests, n_problems) == ("0", "1")
    assert f"{path}#0 ConfigMap/lol" in run.stdout and "excessive aliasing" in run.stdout


def test_load_refuses_the_bomb_with_a_yaml_error() -> None:
    with pytest.raises(yaml.YAMLError) as raised:
        load(bomb())
    assert isinstance(raised.value, DecodeError) and "excessive aliasing" in only(list(raised.value.problems)).message


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    docs, problems = decode(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: &loop {self: *loop}\n", "f.yaml"
    )
    problem = only(problems)
    assert (
        docs == []
        and problem.where == "f.yaml#0 ConfigMap/x"
        and (problem.file, problem.document, problem.path) == ("f.yaml", 0, "ConfigMap/x")
        and "&loop (line 4) contains an alias to itself" in problem.message
    )


def alias_text(anchor_size: int, aliases: int) -> str:
    return f"x: &x [{', '.join(['1'] * (anchor_size - 1))}]\nz: [{', '.join(['*x'] * aliases)}]\n"


@pytest.mark.parametrize("aliases", range(104, 118))
def test_the_refusal_flips_where_goyamls_does(aliases: int) -> None:
    """A 1,000-node anchor aliased k times: goyaml refuses from k = 111 (the share passes 99%)."""
    text = alias_text(1000, aliases)
    _, problems = decode(text)
    assert bool(problems) == goyaml_verdict(text) == (aliases >= 111)


@pytest.mark.parametrize(("aliases", "refused"), [(12, False), (13, True)])
def test_the_allowed_share_falls_past_400000_nodes(aliases: int, refused: bool) -> None:
    """A 50,000-node anchor aliased 12 times (650,000 nodes, 92% aliased, 92.8% allowed) is decoded;
    13 times (700,000, 92.9%, 91.6% allowed) is not."""
    docs, problems = decode(alias_text(50_000, aliases))
    assert bool(problems) == refused
    if not refused:
        assert len(docs[0].value["z"]) == aliases and docs[0].value["z"][0] is not docs[0].value["z"][1]


@st.composite
def alias_graphs(draw: st.DrawFn) -> str:
    """A mapping of anchored lists and mappings, each holding scalars and aliases of those before it,
    then a list of `k` aliases of the last, `k` drawn around where goyaml's share crosses 99%: from
    plain data to bombs, on both sides of the line."""
    lines, sizes, plain = [], [], 3  # the document, the mapping, the `top` key
    for i in range(draw(st.integers(1, 4))):
        scalars = draw(st.integers(0 if i else 1, 150))
        refs = draw(st.lists(st.integers(0, i - 1), max_size=5)) if i else []
        items = draw(st.permutations(["s"] * scalars + [f"*a{j}" for j in refs]))
        if draw(st.booleans()):
            body = "[" + ", ".join(items) + "]"
        else:
            body = "{" + ", ".join(f"m{n}: {item}" for n, item in enumerate(items)) + "}"
            plain += len(items)  # the keys
        sizes.append(1 + scalars + sum(1 + sizes[j] for j in refs))
        plain += 2 + scalars + len(refs)  # its key, itself, its scalars, its alias nodes
        lines.append(f"k{i}: &a{i} {body}")
    estimate = max(1, 100 * plain // sizes[-1])
    k = draw(st.integers(0, min(3 * estimate, 100_000 // sizes[-1] + 120)))
    lines.append(f"top: [{', '.join([f'*a{len(sizes) - 1}'] * k)}]")
    return "\n".join(lines) + "\n"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(alias_graphs())
def test_the_budget_agrees_with_goyamls_decoder(text: str) -> None:
    _, problems = decode(text)
    assert bool(problems) == goyaml_verdict(text), problems
    assert all("excessive aliasing" in p.message or "etcd" in p.message for p in problems)


class Excessive(Exception):
    pass


def goyaml_verdict(text: str) -> bool:
    """True when goyaml (v2/v3 decode.go) refuses the document for excessive aliasing: its tree (alias
    nodes kept) rebuilt from the parser's events, then decoded node by node, the test at each node.
    Also true for an object over etcd's limit, the other bound an expansion can hit."""
    anchors: dict[str, Any] = {}
    stack: list[list[Any]] = [["doc", []]]
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        if isinstance(event, yaml.AliasEvent):
            stack[-1][1].append(["alias", anchors[event.anchor]])
        elif isinstance(event, (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            node = (
                ["scalar", event.value]
                if isinstance(event, yaml.ScalarEvent)
                else ["seq" if isinstance(event, yaml.SequenceStartEvent) else "map", []]
            )
            if event.anchor:
                anchors[event.anchor] = node
            stack[-1][1].append(node)
            if not isinstance(event, yaml.ScalarEvent):
                stack.append(node)
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            stack.pop()
    count = {"decoded": 0, "aliased": 0, "depth": 0}

    def unmarshal(node: list[Any]) -> None:
        count["decoded"] += 1
        count["aliased"] += count["depth"] > 0
        if excessive_aliasing(count["decoded"], count["aliased"]):
            raise Excessive
        if node[0] == "alias":
            count["depth"] += 1
            unmarshal(node[1])
            count["depth"] -= 1
        elif node[0] != "scalar":
            for child in node[1]:
                unmarshal(child)

    try:
        unmarshal(["doc", stack[0][1]])
    except Excessive:
        return True
    return len(json.dumps(yaml.load(text, Loader=yaml.CSafeLoader), separators=(",", ":"))) > MAX_OBJECT_BYTES


# --- size bounds -----------------------------------------------------------------------------------


def test_a_file_over_the_request_limit_is_one_problem(tmp_path: Path) -> None:
    line = "  k: " + "x" * 1000 + "\n"
    path = write(
        tmp_path, "big.yaml", CONFIG_MAP + "".join(line.replace("k", f"k{i}") for i in range(MAX_REQUEST_BYTES // 1000))
    )
    manifests, problems = read_manifests([path])
    problem = only(problems)
    assert manifests == [] and problem.where == str(path) and "3 MiB" in problem.message
    assert problem.value == f"{path.stat().st_size:,} bytes"


def test_an_object_over_etcds_limit_is_one_problem_naming_it(tmp_path: Path) -> None:
    blob = "x" * (MAX_OBJECT_BYTES // 2 + 10)
    text = JOB + f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: blob}}\ndata:\n  a: {blob}\n  b: {blob}\n"
    manifests, problems = read_manifests([write(tmp_path, "blob.yaml", text)])
    problem = only(problems)
    assert [m["kind"] for m in manifests] == ["Job"]
    assert (
        problem.where.endswith("blob.yaml#1 ConfigMap/blob")
        and "1.5 MiB" in problem.message
        and "line 15" in problem.message
    )


def test_the_object_limit_counts_expanded_aliases() -> None:
    """100 aliases of a 20 kB string: within the alias budget (100 nodes), 2 MB once expanded."""
    text = (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: wide}}\nblob: &b {'y' * 20_000}\ndata: "
        f"[{', '.join(['*b'] * 100)}]\n"
    )
    problem = only(decode(text, "w.yaml")[1])
    assert problem.where == "w.yaml#0 ConfigMap/wide" and "etcd" in problem.message


def test_each_item_of_a_list_is_an_object_of_its_own() -> None:
    item = (
        "- {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c{i}}}, data: {{a: "
        + "z" * (MAX_OBJECT_BYTES // 2)
        + "}}}}\n"
    )
    text = "apiVersion: v1\nkind: List\nitems:\n" + item.format(i=0) + item.format(i=1)
    docs, problems = decode(text)
    assert problems == [] and len(docs[0].value["items"]) == 2
    big = "apiVersion: v1\nkind: List\nitems:\n" + item.format(i=0).replace("z" * 10, "z" * 30)
    assert only(decode(big, "l.yaml")[1]).where == "l.yaml#0 List/? ConfigMap/c0"


# --- duplicate keys ----------------------------------------------------------------------------------


def test_a_duplicate_key_names_the_key_and_its_line(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, name: b}\ndata:\n  x: '1'\n"
    path = write(tmp_path, "dup.yaml", text)
    problem = only(read_manifests([path])[1])
    assert problem.where == f"{path}#0 ConfigMap/a metadata.name" and problem.value == "name"
    assert "duplicate key 'name' at line 3" in problem.message


def test_duplicates_are_found_at_every_depth_and_only_there() -> None:
    text = textwrap.dedent("""\
        apiVersion: batch/v1
        kind: Job
        metadata: {name: d, labels: {1: one, "1": string-one, 0x1: hex-one}}
        base: &base {a: 1}
        merged: {<<: *base, a: 2}
        spec:
          template:
            spec:
              containers:
              - name: c
                env:
                - {name: A, value: x, value: y}
        """)
    problems = decode(text, "d.yaml")[1]
    assert [p.where for p in problems] == [
        'd.yaml#0 Job/d metadata.labels["0x1"]',
        "d.yaml#0 Job/d spec.template.spec.containers[0].env[0].value",
        'd.yaml#0 Job/d metadata.labels["1"]',  # 1 and "1": one JSON key once kubectl writes it, a value lost
    ]
    assert "line 3 (first at line 3)" in problems[0].message and "line 12" in problems[1].message


def test_a_json_duplicate_key_has_its_line(tmp_path: Path) -> None:
    text = '{\n\t"apiVersion": "v1",\n\t"kind": "Namespace",\n\t"metadata": {"name": "a",\n\t\t"name": "b"}\n}\n'
    problem = only(read_manifests([write(tmp_path, "ns.json", text)])[1])
    assert problem.where.endswith("ns.json#0 Namespace/a metadata.name") and "at line 5" in problem.message


# --- broken input: one line each, with the file and the line ----------------------------------------


def test_non_utf8_bytes(tmp_path: Path) -> None:
    path = write(tmp_path, "latin1.yaml", CONFIG_MAP.encode() + "  caf\u00e9: ol\u00e9\n".encode("latin-1"))
    problem = only(read_manifests([path])[1])
    assert problem.where == str(path) and "not UTF-8 at line 18, column 6" in problem.message


@pytest.mark.parametrize(("text", "kind"), [("- a\n- b\n", "list"), ("just words\n", "string"), ("42\n", "int")])
def test_a_document_that_is_not_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    path = write(tmp_path, "x.yaml", JOB + "---\n" + text)
    manifests, problems = read_manifests([path])
    problem = only(problems)
    assert len(manifests) == 1 and problem.where == f"{path}#1" and f"not a {kind} (line 15)" in problem.message


def test_a_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.yaml", JOB + "---\napiVersion: v1\nkind: Service\nmetadata: {name: [oops\n")
    manifests, problems = read_manifests([path])
    problem = only(problems)
    assert [m["kind"] for m in manifests] == ["Job"]  # the documents before it are kept
    assert problem.where == str(path) and "not valid YAML at line 1" in problem.message


def test_python_tags_are_refused_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = f"!!python/object/apply:os.system [touch {marker}]\n---\nx: !!python/name:os.system\n---\n" + JOB
    manifests, problems = read_manifests([write(tmp_path, "evil.yaml", text)])
    assert not marker.exists() and [m["kind"] for m in manifests] == ["Job"]
    assert len(problems) == 2 and all("could not determine a constructor" in p.message for p in problems)


@pytest.mark.parametrize(
    "text", ["when: !!timestamp 2024-13-45\n", "n: !!int " + "9" * 5000 + "\n", "a: \x01\n", "[" * 1200 + "]" * 1200]
)
def test_values_that_cannot_be_built_are_problems(text: str) -> None:
    assert len(decode(text)[1]) == 1


# --- the CLI -----------------------------------------------------------------------------------------


@pytest.mark.simulator
@pytest.mark.parametrize("command", ["validate", "simulate"])
@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("bomb.yaml", bomb(), ["excessive aliasing"]),
        (
            "dup.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, name: b}\ndata: {x: '1', x: '2'}\n",
            ["duplicate key 'name' at line 3", "duplicate key 'x' at line 4"],
        ),
    ],
)
def test_the_cli_exits_2_with_one_line_per_problem(
    tmp_path: Path, command: str, name: str, text: str, says: list[str]
) -> None:
    path = write(tmp_path, name, text)
    run = subprocess.run(
        [str(JAXINFRA), command, str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False
    )
    errors = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert len(errors) == len(says) and all(s in e and str(path) in e for s, e in zip(says, errors)), run.stderr


# --- any mutation of a valid manifest: problems, never an exception, in bounded time -----------------


KEY_VALUE = re.compile(r"^( *)(- )?([A-Za-z_.-]+):( .*)?$")
_PLAIN: list[float] = []


def plain_read_seconds(tmp: Path) -> float:
    """How long the largest unmutated input takes to decode here (the best of 5, measured once): the baseline."""
    if not _PLAIN:
        path = write(tmp, "plain.yaml", JOB + "---\n" + CONFIG_MAP)
        read_manifests([path])
        _PLAIN.append(min(_timed(lambda: read_manifests([path])) for _ in range(5)))
    return _PLAIN[0]


def _timed(call: Any) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A docs manifest edited 1 to 4 times, mostly in place, so that much of it is still YAML."""
    text = draw(st.sampled_from([JOB, CONFIG_MAP, JOB + "---\n" + CONFIG_MAP]))
    for n in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["bytes", "alias", "duplicate", "nesting", "bomb", "tag"]))
        if kind == "bytes":
            raw = text.encode("utf-8", "surrogateescape")
            pos = draw(st.integers(0, len(raw)))
            text = (raw[:pos] + draw(st.binary(min_size=1, max_size=8)) + raw[pos:]).decode("utf-8", "surrogateescape")
            continue
        lines = text.splitlines(keepends=True)
        pairs = [i for i, line in enumerate(lines) if KEY_VALUE.match(line.rstrip("\n"))]
        if not pairs:
            continue
        at = draw(st.sampled_from(pairs))
        indent, dash, key, value = KEY_VALUE.match(lines[at].rstrip("\n")).groups()  # type: ignore[union-attr]
        head = f"{indent}{dash or ''}{key}:"
        if kind == "alias":  # anchor this value, alias it from a new top-level key (or from anywhere)
            lines[at] = f"{head} &x{n}{value or ''}\n"
            where = draw(st.sampled_from([len(lines), at + 1]))
            pad = "" if where == len(lines) else indent + ("  " if dash else "")
            lines.insert(where, f"{pad}z{n}: [{', '.join([f'*x{n}'] * draw(st.integers(1, 200)))}]\n")
        elif kind == "duplicate":
            lines.insert(at + 1, lines[at] if not dash else lines[at].replace("- ", "  ", 1))
        elif kind == "nesting":
            depth = draw(st.integers(1, 3000))
            lines[at] = f"{head} {'[' * depth}{(value or ' 1').strip()}{']' * depth}\n"
        elif kind == "bomb":
            body = bomb(draw(st.integers(2, 12)), draw(st.integers(2, 12))).split("data:\n", 1)[1]
            lines.append(textwrap.dedent(body).replace("&l", f"&b{n}l").replace("*l", f"*b{n}l"))
        else:
            tag = draw(
                st.sampled_from(
                    [
                        "!!python/object:os.system",
                        "!!python/object/apply:os.system",
                        "!!binary",
                        "!!set",
                        "!!omap",
                        "!!timestamp",
                        "!!int",
                        "!custom",
                        "!!str",
                        "!!map",
                    ]
                )
            )
            lines[at] = f"{head} {tag}{value or ''}\n"
        text = "".join(lines)
    return text.encode("utf-8", "surrogateescape")


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(data=mutated())
def test_any_mutation_decodes_to_problems_in_bounded_time(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "m.yaml"
    path.write_bytes(data)
    start = time.perf_counter()
    manifests, problems = read_manifests([path])
    took = time.perf_counter() - start
    if took >= 1000 * plain_read_seconds(
        tmp_path
    ):  # a busy moment, or a decoding that blows up: timed again, best of 3
        took = min(_timed(lambda: read_manifests([path])) for _ in range(3))
    assert took < 1000 * plain_read_seconds(tmp_path), took  # a ratio to the unmutated manifests, not a wall bound
    assert all(isinstance(m, dict) for m in manifests) and all(isinstance(p, Problem) for p in problems)
    assert all(str(path) in p.where for p in problems)
    _, found = read_documents(path)  # the path validate takes: the same decoding problems
    assert found == [p for p in problems if "must be a mapping" not in p.message]
