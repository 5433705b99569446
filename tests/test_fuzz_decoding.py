"""Every bad input a clear error (issue #38): keys and values of every kind YAML has (dates, timestamps, `!!binary`,
ints of every size and base, floats, `.inf`, `.nan`, booleans, null, lists, maps, sets) in every field the front door
and the simulator read, in manifests in the style of upstream examples. Never a traceback: `jaxinfra validate` exits
0 or 2, each problem a line naming its file, object and field; what the API server would store goes through the
simulator's emulation (what `jaxinfra simulate` does before any process starts) without an exception.

What a value decodes to is what kubectl sends (`jaxinfra.yamlio`'s docstring: goyaml v2's scalars, sigs.k8s.io/yaml's
conversion to JSON); the explicit cases below pin that, and the three failures measured for the issue.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxinfra.admission import read
from jaxinfra.entry import status
from jaxinfra.errors import Refused
from jaxinfra.goyaml import go_float32, goyaml_scalar
from jaxinfra.yamlio import decode, load
from jaxinfra_sim.cluster import sources
from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.core.options import Options
from jaxinfra_sim.jax.timeouts import init_timeout
from jaxinfra_sim.node import cgroups
from tests.support.admitted import stored
from tests.support.problems import problems_of

pytestmark = pytest.mark.unit

# --- the manifests: an Indexed Job and its headless Service (the Kubernetes docs' "Indexed Job for parallel processing
# with static work assignment", made a JAX group), a JobSet (jobset's examples/simple) queued by Kueue (its docs' single
# ClusterQueue setup), a Pod (the docs' nginx) -------------------------------------------------------------------------

# `{LABELS}` and the like: one line each, a flow collection after its field's key, where one injection goes.
STREAM = """\
apiVersion: v1
kind: Service
metadata:
  name: workers
spec:
  clusterIP: None
  selector: {SELECTOR}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: indexed
  labels: {LABELS}
  annotations: {ANNOTATIONS}
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  backoffLimit: 0
  template:
    metadata:
      labels: {TEMPLATE_LABELS}
    spec:
      subdomain: workers
      restartPolicy: Never
      nodeSelector: {NODE_SELECTOR}
      containers:
      - name: worker
        image: python:3.11
        command: {COMMAND}
        args: {ARGS}
        env: {ENV}
        ports: {PORTS}
        resources:
          limits: {LIMITS}
          requests: {REQUESTS}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: default-flavor
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cluster-queue
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: {QUOTA}
      - name: memory
        nominalQuota: 36Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: user-queue
spec:
  clusterQueue: cluster-queue
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: simple
  labels: {JOBSET_LABELS}
spec:
  replicatedJobs:
  - name: workers
    replicas: 1
    template:
      spec:
        completionMode: Indexed
        completions: 2
        parallelism: 2
        backoffLimit: 0
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: jax
              image: python:3.11
              env: {JOBSET_ENV}
              resources:
                requests: {JOBSET_REQUESTS}
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: widget
  labels: {WIDGET_LABELS}
  annotations: {WIDGET_ANNOTATIONS}
spec: {size: 1}
---
apiVersion: v1
kind: Pod
metadata:
  name: nginx
  annotations: {POD_ANNOTATIONS}
spec:
  containers:
  - name: nginx
    image: nginx:1.14.2
    ports: {POD_PORTS}
"""

# Each site: its field's key (the words a problem line names, as a path or as the line it quotes) and what it holds
# when nothing is injected there.
SITES: dict[str, tuple[str, str]] = {
    "SELECTOR": ("selector", "{job-name: indexed}"),
    "LABELS": ("labels", "{app: demo}"),
    "ANNOTATIONS": ("annotations", "{note: demo}"),
    "TEMPLATE_LABELS": ("labels", "{app: demo}"),
    "NODE_SELECTOR": ("nodeSelector", "{kubernetes.io/os: linux}"),
    "COMMAND": ("command", "[python, -c]"),
    "ARGS": ("args", '["print(1)"]'),
    "ENV": ("env", '[{name: JAX_NUM_CPU_DEVICES, value: "1"}]'),
    "PORTS": ("ports", "[{containerPort: 8476, name: coordinator}]"),
    "LIMITS": ("limits|resources", '{cpu: "1", memory: 1Gi}'),  # a request's problem may name its limit, and back
    "REQUESTS": ("requests|resources", "{cpu: 500m}"),
    "QUOTA": ("nominalQuota", "9"),
    "JOBSET_LABELS": ("labels", "{kueue.x-k8s.io/queue-name: user-queue}"),
    "JOBSET_ENV": ("env", '[{name: JAX_NUM_CPU_DEVICES, value: "1"}]'),
    "JOBSET_REQUESTS": ("requests|resources", "{cpu: 500m}"),
    "WIDGET_LABELS": ("labels", "{app: demo}"),  # a kind with no schema here: its metadata is an ObjectMeta still
    "WIDGET_ANNOTATIONS": ("annotations", "{note: demo}"),
    "POD_ANNOTATIONS": ("annotations", "{note: demo}"),
    "POD_PORTS": ("ports", "[{containerPort: 80}]"),
}
MAPS = {"SELECTOR", "LABELS", "ANNOTATIONS", "TEMPLATE_LABELS", "NODE_SELECTOR", "LIMITS", "REQUESTS"}
MAPS |= {"JOBSET_LABELS", "JOBSET_REQUESTS", "WIDGET_LABELS", "WIDGET_ANNOTATIONS", "POD_ANNOTATIONS"}
LISTS = {"COMMAND", "ARGS"}

# YAML text of every kind, as a key or a value (flow context: no `,[]{}` inside a plain scalar).
SCALARS = [
    # dates and timestamps: goyaml keeps their text
    "2024-01-01",
    "2024-1-2",
    "2024-13-45",
    "2024-01-01T10:00:00Z",
    "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.10",
    "!!timestamp 2024-01-01",
    "!!timestamp 2024-13-45",
    # binary
    "!!binary aGVsbG8=",
    "!!binary /w==",
    "!!binary AAEC",
    "!!binary not-base64",
    # ints, every base and size
    "0",
    "42",
    "-7",
    "+5",
    "0x1F",
    "0o17",
    "017",
    "08",
    "1_000",
    "0b101",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "9" * 30,
    "9" * 400,
    "!!int 12",
    "!!int abc",
    # floats
    "1.5",
    "-0.0",
    "2.0",
    "1e3",
    "1E-3",
    ".5",
    "1e21",
    "1e5000",
    "1.0e+5000",
    ".inf",
    "-.inf",
    ".nan",
    "nan",
    "NaN",
    "inf",
    "!!float 1",
    # booleans, null
    "true",
    "false",
    "y",
    "n",
    "Y",
    "yes",
    "no",
    "on",
    "off",
    "!!bool yes",
    "~",
    "null",
    "Null",
    "!!null ''",
    '""',
    # base 60 (YAML 1.1, not goyaml), and the odd one out
    "1:30",
    "1:30.5",
    "=",
    # quantities, plausible and absurd
    "8Gi",
    "1Ei",
    "8Ei",
    "9Ei",
    "1e18",
    "1e19",
    "100m",
    "1n",
    "0.000000001",
    "1e-1000",
    "1e999999",
    "1e3000000000",
    "-1",
    "-1Gi",
    "1K",
    # strings
    "app",
    "example.com/x",
    "JAX_INITIALIZATION_TIMEOUT",
    '"\\0"',
    '"a\\tb"',
    '"x\\u2028y"',
    "!!str 12",
    # collections
    "[a, b]",
    "[]",
    "{a: 1}",
    "{}",
    "!!set {a, b}",
    "!!omap [a: 1]",
    "!!pairs [a: 1]",
]
TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Co", "Cn"), max_codepoint=0xFFFF), max_size=12)
SNIPPET = st.one_of(st.sampled_from(SCALARS), TEXT.map(lambda s: json.dumps(s, ensure_ascii=False)))


@st.composite
def injected(draw: st.DrawFn) -> tuple[str, str]:
    """The stream with one key or value injected at one site: (its field's word, the text)."""
    site = draw(st.sampled_from(sorted(SITES)))
    word, _ = SITES[site]
    snippet = draw(SNIPPET)
    if site in MAPS:
        how = draw(st.sampled_from(["key", "value"]))
        value = '"1"' if "REQUESTS" in site or site == "LIMITS" else "x"
        entry = f"? {snippet} : {value}" if how == "key" else f"inj: {snippet}"
        text = "{" + entry + ", " + SITES[site][1][1:]
    elif site in LISTS:
        text = "[python, " + snippet + "]"
    elif site in ("ENV", "JOBSET_ENV"):
        name, value = draw(st.sampled_from([(snippet, '"1"'), ("JAX_INITIALIZATION_TIMEOUT", snippet), ("A", snippet)]))
        text = f"[{{name: {name}, value: {value}}}]"
    elif site in ("PORTS", "POD_PORTS"):
        text = draw(st.sampled_from([f"[{{containerPort: {snippet}}}]", f"[{{containerPort: 8476, name: {snippet}}}]"]))
    else:
        text = snippet
    fields = {name: default for name, (_, default) in SITES.items()} | {site: text}
    return word, re.sub(r"\{([A-Z_]+)\}", lambda m: fields[m[1]], STREAM)


def validate_cli(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """`jaxinfra validate PATH`, in this process, as the console script runs it (`jaxinfra.entry.status`): its exit
    status and its error lines; pytest fails on any exception that escapes it."""
    from jaxinfra.cli import app

    capsys.readouterr()
    code = status(lambda: app(args=["validate", str(path)], standalone_mode=True))
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return code, [line for line in err.splitlines() if line.startswith("error: ")]


def emulated(path: Path) -> None:
    """What `jaxinfra simulate PATH` does before any process starts, where the API server stores everything: the
    front door (`sources.admitted`), then the emulation; what it serves is JSON, every pod's timeouts and limits
    numbers the runner can use."""
    requests, unreadable = read([path])
    source = sources.admitted(str(path), requests)
    if unreadable or any(isinstance(p, Refused) for p in source.problems):
        return  # exit 2 before the simulation: validate's problems
    for obj in source.manifests:  # what every reader of metadata may take for granted, whatever the kind
        meta = obj.get("metadata") or {}
        for field in ("labels", "annotations"):  # (null: the Go map's "")
            assert all(isinstance(k, str) and isinstance(v, str | None) for k, v in (meta.get(field) or {}).items())
    cluster = emulate(source.manifests, api_objects=True)
    json.dumps(list(cluster.objects), allow_nan=False)
    for workload in cluster.workloads:
        for pod in workload.pods:
            assert all(isinstance(v, str) for v in (*pod.labels.values(), *pod.annotations.values()))
            assert math.isfinite(init_timeout(pod.env, Options()))
            for container in (pod, *pod.others):
                assert container.memory_limit is None or 0 < container.memory_limit <= cgroups.MAX_INT64
                assert container.cpu_millis is None or 0 < container.cpu_millis <= cgroups.MAX_INT64
    for problem in problems_of(cluster):
        assert problem.where and problem.message and problem.fix, problem


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=injected())
def test_any_scalar_anywhere_is_a_problem_line_or_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: tuple[str, str]
) -> None:
    word, text = case
    path = tmp_path / "stream.yaml"
    path.write_text(text, encoding="utf-8")
    code, errors = validate_cli(path, capsys)
    assert code in (0, 2), errors
    assert all(line.startswith(f"error: {path}#") for line in errors), errors
    if code == 2:
        assert any(w in line for line in errors for w in word.split("|")), (word, errors)
    emulated(path)


# --- the three measured failures -------------------------------------------------------------------------------------

INDEXED = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: pi
  labels: {LABELS}
spec:
  completionMode: Indexed
  completions: 1
  parallelism: 1
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: pi
        image: python:3.11
        env: {ENV}
        resources:
          limits: {LIMITS}
"""


def indexed(labels: str = "{app: pi}", env: str = "[]", limits: str = "{memory: 1Gi}") -> str:
    return INDEXED.replace("{LABELS}", labels).replace("{ENV}", env).replace("{LIMITS}", limits)


def test_date_timestamp_and_binary_label_keys_are_the_strings_kubectl_sends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """goyaml keeps a date's or a timestamp's text, `!!binary` is its bytes: valid label keys, stored as strings; the
    emulation (which crashed serving them as JSON) runs."""
    text = indexed("{2024-01-01: a, 2001-12-14t21:59:43.10-05:00: b, !!binary aGVsbG8= : c}")
    [job] = load(text)
    assert list(job["metadata"]["labels"]) == ["2024-01-01", "2001-12-14t21:59:43.10-05:00", "hello"]
    path = tmp_path / "job.yaml"
    path.write_text(text, encoding="utf-8")
    code, errors = validate_cli(path, capsys)
    assert (code, errors) == (2, [errors[0]])  # a label key may not hold ':' (the timestamp's): the API server says so
    assert "metadata.labels = '2001-12-14t21:59:43.10-05:00'" in errors[0] and "name part must consist" in errors[0]
    path.write_text(indexed("{2024-01-01: a, !!binary aGVsbG8= : c, 2024-01-01T10:00:00Z: y}"), encoding="utf-8")
    code, errors = validate_cli(path, capsys)
    assert code == 2 and any('labels["2024-01-01T10:00:00Z"] = True' in e for e in errors), errors  # `y` is true
    path.write_text(indexed("{2024-01-01: a, !!binary aGVsbG8= : c}"), encoding="utf-8")
    assert validate_cli(path, capsys) == (0, [])
    emulated(path)
    [job] = stored(load(path.read_text()))
    assert job["metadata"]["labels"] == {"2024-01-01": "a", "hello": "c"}


def test_a_null_label_value_is_the_empty_string_go_decodes() -> None:
    """`labels: {a: ~}` is accepted (the schema's values are nullable) and decodes into a Go map[string]string as "",
    not as the text "None"."""
    spec = "    spec:\n      restartPolicy"
    text = indexed().replace(spec, "    metadata: {labels: {a: ~}}\n" + spec)
    [workload] = emulate(stored(load(text))).workloads
    assert workload.pods[0].labels["a"] == ""


def test_a_memory_limit_past_int64_is_what_the_kubelet_reads_it_as(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`1e5000` is a quantity the API server stores (a string: goyaml's float overflows); the kubelet's Value()
    saturates at 2^63 - 1 bytes. `.inf` is no JSON number: kubectl cannot send it. A negative limit is refused."""
    path = tmp_path / "job.yaml"
    for limit, code, says in [
        ("1e5000", 0, None),
        ("1.0e+5000", 0, None),
        (".inf", 2, "kubectl cannot send it"),
        (".nan", 2, "kubectl cannot send it"),
        ("-1Gi", 2, "must be greater than or equal to 0"),
        ("nan", 2, "quantities must match the regular expression"),
    ]:
        path.write_text(indexed(limits=f"{{memory: {limit}}}"), encoding="utf-8")
        found, errors = validate_cli(path, capsys)
        assert found == code, (limit, errors)
        if says:
            assert len(errors) == 1 and "limits.memory" in errors[0] and says in errors[0], errors
        emulated(path)
    [workload] = emulate(stored(load(indexed(limits="{memory: 1e5000, cpu: 1e5000}")))).workloads
    assert workload.pods[0].memory_limit == cgroups.MAX_INT64 and workload.pods[0].cpu_millis is None
    [problem] = [p for p in workload.problems if "limits.cpu" in p.path]
    assert problem.value == "1e5000" and "RunContainerError" in problem.message


@pytest.mark.parametrize("value", ["abc", "1.5", "", "2147483648", "9" * 5000])
def test_a_jax_initialization_timeout_jax_cannot_take_is_a_problem(value: str) -> None:
    """JAX reads no such variable; the env contract's programs (and the probe) pass int() of it to
    jax.distributed.initialize, whose client takes a 32-bit int: a problem before anything starts, naming the pods,
    the container, the variable, the value and the fix; the runner's own wait is JAX's default."""
    env = f'[{{name: JAX_INITIALIZATION_TIMEOUT, value: "{value}"}}]'
    [workload] = emulate(stored(load(indexed(env=env)))).workloads
    [problem] = [p for p in workload.problems if "JAX_INITIALIZATION_TIMEOUT" in p.path]
    assert problem.path == "Job/default/pi pods of pi container pi env JAX_INITIALIZATION_TIMEOUT"
    assert problem.value == value and "int()" in problem.message and '"300"' in problem.fix
    assert init_timeout(workload.pods[0].env, Options()) == 300.0
    [workload] = emulate(stored(load(indexed(env=env))), check_all=False).workloads  # --run-command: a note
    assert not [p for p in workload.problems if "JAX_INITIALIZATION_TIMEOUT" in p.path]


def test_a_whole_jax_initialization_timeout_is_used() -> None:
    env = '[{name: JAX_INITIALIZATION_TIMEOUT, value: " 120 "}]'
    [workload] = emulate(stored(load(indexed(env=env)))).workloads
    assert not [p for p in workload.problems if "JAX_INITIALIZATION_TIMEOUT" in p.path]
    assert init_timeout(workload.pods[0].env, Options()) == 120.0
    assert init_timeout(workload.pods[0].env, Options(init_timeout=30)) == 30.0


def test_the_metadata_of_a_kind_with_no_schema_here_is_an_object_meta(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A custom resource's metadata is decoded into ObjectMeta whatever its CRD says: `simulate`, which reads every
    object's annotations, crashed on `annotations: 5` stored as is."""
    path = tmp_path / "widget.yaml"
    path.write_text(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, annotations: 5, labels: {a: [1], b: y}}\n",
        encoding="utf-8",
    )
    code, errors = validate_cli(path, capsys)
    assert code == 2 and [e.split(" = ")[0].rsplit(" ", 1)[1] for e in errors] == [
        "metadata.annotations",
        "metadata.labels.a",
        "metadata.labels.b",
    ], errors
    from jaxinfra.cli import app

    assert status(lambda: app(args=["simulate", str(path)], standalone_mode=True)) == 2
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.simulator
def test_the_cli_says_so_without_a_traceback(tmp_path: Path) -> None:
    """The three measured inputs through the console script: validate and simulate, each a problem line or a run."""
    jaxinfra = Path(sys.executable).parent / "jaxinfra"
    cases = {  # the file, and what simulate's problem line says (None: its pod runs, whatever its JAX makes of it)
        "labels.yaml": (indexed("{2024-01-01: a, ? !!binary aGVsbG8= : b, 1.5: c}"), None),
        "memory.yaml": (indexed(limits="{memory: 1e5000}"), None),  # its cgroup's limit: the kubelet's int64, no crash
        "cpu.yaml": (indexed(limits="{cpu: 1e5000}"), "resources.limits.cpu = '1e5000'"),
        "timeout.yaml": (indexed(env='[{name: JAX_INITIALIZATION_TIMEOUT, value: "abc"}]'), "= 'abc': not a whole"),
    }
    for name, (text, says) in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        for command in ("validate", "simulate"):
            run = subprocess.run(
                [str(jaxinfra), command, str(path), *(["--timeout", "120"] if command == "simulate" else [])],
                capture_output=True,
                text=True,
                timeout=300,
                cwd=tmp_path,
                check=False,
            )
            assert "Traceback" not in run.stderr + run.stdout, run.stderr
            if command == "validate":
                assert run.returncode == 0, run.stderr
            elif says is None:  # the API server emulation serves the pod, date and binary label keys and all
                assert run.returncode in (0, 1) and "Job/default/pi attempt 0:" in run.stdout, run.stdout + run.stderr
            else:  # the simulation's verdict, nothing started: exit 1, the problem's line, the summary line
                errors = [line for line in run.stdout.splitlines() if line.startswith("error: ")]
                assert run.returncode == 1 and len(errors) == 1 and says in errors[0], run.stdout + run.stderr


# --- what kubectl sends, pinned ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tag", "value"),
    [
        ("y", "bool", True),
        ("N", "bool", False),
        ("on", "bool", True),
        ("1e3", "float", 1000.0),
        ("0o17", "int", 15),
        ("017", "int", 15),
        ("08", "float", 8.0),
        ("1_000", "int", 1000),
        ("0x1F", "int", 31),
        ("-0b11", "int", -3),
        ("18446744073709551615", "int", 2**64 - 1),
        ("18446744073709551616", "float", 2.0**64),
        ("9" * 400, "str", "9" * 400),
        ("1e5000", "str", "1e5000"),
        ("1.0e+5000", "str", "1.0e+5000"),
        (".5e999", "str", ".5e999"),
        ("1:30", "str", "1:30"),
        ("2024-13-45", "str", "2024-13-45"),
        ("2024-01-01", "str", "2024-01-01"),  # a timestamp, decoded as its text: the same string
        ("2001-12-14 21:59:43.10", "str", "2001-12-14 21:59:43.10"),
        ("NaN", "str", "NaN"),
        ("._5", "str", "._5"),
        ("<<", "merge", "<<"),
        ("", "null", None),
    ],
)
def test_plain_scalars_resolve_as_goyaml_v2(text: str, tag: str, value: Any) -> None:
    assert goyaml_scalar(text) == (tag, value)


@pytest.mark.parametrize(
    ("text", "fits"),
    [("2024-01-01", True), ("2024-1-2", True), ("2001-12-14t21:59:43.10-05:00", True), ("2001-12-14 21:59:43", True)]
    + [("2024-13-45", False), ("2024-02-30", False), ("2024-01-01T10:00:00", False), ("24-01-01", False)],
)
def test_an_explicit_timestamp_is_one_goyaml_parses(text: str, fits: bool) -> None:
    assert (goyaml_scalar(text, "timestamp")[0] == "timestamp") == fits


@pytest.mark.parametrize(
    ("key", "written"),
    [(1.5, "1.5"), (0.1, "0.1"), (1e6, "1e+06"), (123456.0, "123456"), (1234567.0, "1.234567e+06")]
    + [(1e-5, "1e-05"), (0.0001, "0.0001"), (1e300, ".inf"), (-2.5, "-2.5"), (3.0, "3"), (-0.0, "-0")],
)
def test_float_keys_are_written_as_sigs_k8s_io_yaml_writes_them(key: float, written: str) -> None:
    assert go_float32(key) == written


def test_what_kubectl_sends() -> None:
    [doc] = load(
        textwrap.dedent("""\
            a: {2024-01-01: x, 1.5: u, true: z, 12: w, !!binary aGVsbG8= : v}
            b: [!!binary /w==, 2.0, 1e3, !!timestamp 2024-01-01, 1e21, -0.0]
            c: !!set {q, r}
            d: !!omap [k: 1]
            e: &x {f: 1}
            g: *x
            """)
    )
    assert doc["a"] == {"2024-01-01": "x", "1.5": "u", "true": "z", "12": "w", "hello": "v"}
    assert doc["b"] == ["\ufffd", 2, 1000, "2024-01-01", 1e21, 0]
    assert doc["c"] == {"q": None, "r": None} and doc["d"] == [{"k": 1}]
    assert doc["g"] == doc["e"] and doc["g"] is not doc["e"]


@pytest.mark.parametrize(
    ("text", "path", "says"),
    [
        ("a: {x: .inf}\n", "a.x", "unsupported value: +Inf"),
        ("a: [-.inf]\n", "a[0]", "unsupported value: -Inf"),
        ("a: {x: .nan}\n", "a.x", "unsupported value: NaN"),
        ("a: {~: 1}\n", "a.null", "unsupported map key of type: <nil>"),
        ("a: {18446744073709551615: 1}\n", 'a["18446744073709551615"]', "unsupported map key of type: uint64"),
        ('{"a": NaN}', "a", "unsupported value: NaN"),
        ('{"a": 1e999}', "a", "unsupported value: +Inf"),
    ],
)
def test_what_kubectl_cannot_send_is_a_problem_naming_the_field(text: str, path: str, says: str) -> None:
    docs, problems = decode(text, "f.yaml")
    assert docs == [] and len(problems) == 1, problems
    assert problems[0].where == f"f.yaml#0 ?/? {path}" and says in problems[0].message


def test_keys_that_become_one_string_lose_a_value() -> None:
    docs, problems = decode('a: {1: x, "1": y, 1.0: z, true: t}\n', "f.yaml")
    assert [p.where for p in problems] == ['f.yaml#0 ?/? a["1"]', 'f.yaml#0 ?/? a["1"]']
    assert docs[0].value == {"a": {"1": "z", "true": "t"}}


@pytest.mark.parametrize("text", ["a: !!int abc\n", "a: !!timestamp 2024-13-45\n", "a: !!binary not-base64\n"])
def test_a_tag_that_does_not_fit_its_value_is_goyamls_refusal(text: str) -> None:
    docs, problems = decode(text, "f.yaml")
    assert docs == [] and len(problems) == 1 and "cannot decode it at line 1" in problems[0].message
