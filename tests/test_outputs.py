"""Where commands read and write, as users run them (a subprocess in their own folder): the default stacks, every
output path checked before any work (one line per problem, exit 2, nothing written), and `--version`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from jaxinfra.errors import MACHINE_LIMIT
from tests.support import unprivileged

pytestmark = pytest.mark.simulator

STACK = """
from jaxinfra import CPU, Cluster, JaxJob, NodePool
cluster = Cluster(name="{name}", node_pools=[NodePool("cpu", CPU(devices=2))],
                  jobs=[JaxJob("train", image="python:3.11-slim", command=["python", "-m", "train"], node_pool="cpu",
                               nodes=2)])
"""
NO_STACK = (
    "error: stacks = './stacks': no stack here (no [tool.jaxinfra] stacks in ./pyproject.toml, no .py in "
    "./stacks); fix: pass a stack file, or run from your repository's root (jaxinfra init writes one)"
)
KEY = "error: pyproject.toml [tool.jaxinfra] stacks = "


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jaxinfra", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def stack(folder: Path, name: str, file: str | None = None) -> Path:
    """A tiny CPU stack declaring the cluster `name`, in `folder/<file or name>.py`."""
    path = folder / (file or f"{name}.py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(STACK.format(name=name)), encoding="utf-8")
    return path


def tree(root: Path) -> list[str]:
    """Every file and folder under `root`: what a command that writes nothing must leave as it was."""
    return sorted(
        str(p.relative_to(root)) + ("/" if p.is_dir() and not p.is_symlink() else "") for p in root.rglob("*")
    )


def errors(r: subprocess.CompletedProcess[str]) -> list[str]:
    """The error lines of a command stopped by its input (exit 2, a summary line, no traceback)."""
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    n = len(lines) - 1
    assert lines[-1].startswith(f"jaxinfra: {n} {'problem' if n == 1 else 'problems'} (")
    assert "nothing written" in lines[-1]
    return lines[:-1]


# --- --version ----------------------------------------------------------------------------------------------------


def test_version_is_printed_without_loading_the_app(tmp_path: Path) -> None:
    r = cli(tmp_path, "--version")
    assert r.returncode == 0 and r.stdout == f"jaxinfra {metadata.version('jaxinfra')}\n" and r.stderr == ""
    code = (
        "import sys; from jaxinfra.entry import run; code = run(['--version'])\n"
        "print(code, sorted(m for m in sys.modules if m.split('.')[0] in {'typer', 'click', 'pydantic', 'rich'}))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.stdout.splitlines()[-1] == "0 []", r.stdout + r.stderr


def test_version_is_listed_in_help(tmp_path: Path) -> None:
    r = cli(tmp_path, "--help")
    assert r.returncode == 0 and "--version" in r.stdout


# --- the default stacks ---------------------------------------------------------------------------------------------


def test_synth_without_stacks_writes_every_stack_of_the_stacks_folder(tmp_path: Path) -> None:
    stack(tmp_path / "stacks", "one")
    stack(tmp_path / "stacks", "two")
    (tmp_path / "stacks" / "_helpers.py").write_text("X = 1\n")  # a helper, not a stack
    r = cli(tmp_path, "synth")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["one.yaml", "two.yaml"]
    assert r.stderr.splitlines() == ["wrote out/one.yaml", "wrote out/two.yaml"]
    r = cli(tmp_path, "explain")
    assert r.returncode == 0, r.stderr
    assert "stacks/one.py" in r.stdout and "stacks/two.py" in r.stdout


def test_the_pyproject_list_wins_over_the_stacks_folder(tmp_path: Path) -> None:
    stack(tmp_path / "stacks", "ignored")
    stack(tmp_path / "infra", "first")
    stack(tmp_path / "more", "second")
    stack(tmp_path / "more", "third")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.jaxinfra]\nstacks = ["infra/first.py", "more"]\n'
    )
    r = cli(tmp_path, "synth", "-o", "yaml")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "yaml").iterdir()) == ["first.yaml", "second.yaml", "third.yaml"]


def test_simulate_takes_its_own_list_and_the_other_commands_every_stack(tmp_path: Path) -> None:
    """A repository whose stacks are all synthesized but of which one is simulated by default (this checkout's root:
    `[tool.jaxinfra.simulate] stacks`); a malformed list is named as that key."""
    stack(tmp_path / "stacks", "small")
    stack(tmp_path / "stacks", "large")
    (tmp_path / "pyproject.toml").write_text('[tool.jaxinfra.simulate]\nstacks = ["stacks/small.py"]\n')
    r = cli(tmp_path, "explain")
    assert r.returncode == 0 and "stacks/small.py" in r.stdout and "stacks/large.py" in r.stdout, r.stderr
    r = cli(tmp_path, "simulate", "--no-logs")
    assert r.returncode == 0, r.stderr
    assert "stacks/small.py: " in r.stdout and "stacks/large.py" not in r.stdout + r.stderr
    (tmp_path / "pyproject.toml").write_text('[tool.jaxinfra.simulate]\nstacks = ["stacks/missing.py"]\n')
    [line] = errors(cli(tmp_path, "simulate", "--no-logs"))
    assert line.startswith("error: pyproject.toml [tool.jaxinfra.simulate] stacks = 'stacks/missing.py': no such file")
    assert cli(tmp_path, "synth", "-o", "out").returncode == 0  # the other commands still take ./stacks


def test_no_stack_anywhere_is_one_error_naming_what_was_looked_for(tmp_path: Path) -> None:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.jaxinfra.simulate.images]\n"python:3.11" = "."\n')
    for command in (["synth"], ["explain"], ["simulate", "--no-logs"]):
        before = tree(tmp_path)
        r = cli(tmp_path, *command)
        assert errors(r) == [NO_STACK], command
        assert r.stdout == "" and tree(tmp_path) == before


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ('"stacks"', "'stacks': expected a non-empty list of paths (strings)"),
        ("[]", "[]: expected a non-empty list of paths (strings)"),
        ('["stacks", 3]', "['stacks', 3]: expected a non-empty list of paths (strings)"),
        (
            '["stacks/one.py", "missing.py", "notes.txt", "empty"]',
            "'missing.py': no such file or folder|'notes.txt': not a Python stack file"
            "|'empty': no stack (.py) in this folder",
        ),
    ],
    ids=["string", "empty", "not-strings", "paths"],
)
def test_a_malformed_pyproject_list_is_an_error_naming_it(tmp_path: Path, value: str, line: str) -> None:
    stack(tmp_path / "stacks", "one")
    (tmp_path / "notes.txt").write_text("not a stack\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "pyproject.toml").write_text(f"[tool.jaxinfra]\nstacks = {value}\n")
    r = cli(tmp_path, "synth")
    lines = errors(r)
    assert [ln.split("; fix: ")[0] for ln in lines] == [KEY + part for part in line.split("|")]
    assert all("; fix: list stack files or folders, relative to pyproject.toml" in ln for ln in lines)
    assert not (tmp_path / "out").exists()


def test_a_pyproject_that_is_not_toml_is_an_error(tmp_path: Path) -> None:
    stack(tmp_path / "stacks", "one")
    (tmp_path / "pyproject.toml").write_text("[tool.jaxinfra\n")
    [line] = errors(cli(tmp_path, "synth"))
    assert line.startswith("error: pyproject.toml = 'TOMLDecodeError': ") and not (tmp_path / "out").exists()


def test_output_and_stack_problems_come_together(tmp_path: Path) -> None:
    lines = errors(cli(tmp_path, "simulate", "--json", "nowhere/report.json"))
    assert lines == [
        "error: --json = 'nowhere/report.json': its folder does not exist; fix: create nowhere first, or "
        "write the file elsewhere",
        NO_STACK,
    ]


# --- output paths: synth -o ------------------------------------------------------------------------------------------


@pytest.fixture
def two(tmp_path: Path) -> Path:
    """A folder with ./stacks holding two stacks (clusters `one` and `two`)."""
    stack(tmp_path / "stacks", "one")
    stack(tmp_path / "stacks", "two")
    return tmp_path


def test_synth_out_that_is_a_file(two: Path) -> None:
    (two / "taken").write_text("mine\n")
    before = tree(two)
    assert errors(cli(two, "synth", "-o", "taken")) == [
        "error: --out = 'taken': is a file, not a folder; fix: name a folder (it is created if missing)"
    ]
    assert tree(two) == before and (two / "taken").read_text() == "mine\n"


def test_synth_out_below_a_file(two: Path) -> None:
    (two / "taken").write_text("mine\n")
    before = tree(two)
    assert errors(cli(two, "synth", "-o", "taken/yaml")) == [
        "error: --out = 'taken/yaml': cannot be created: taken is a file; fix: write elsewhere, or move the file away"
    ]
    assert tree(two) == before


def test_synth_out_where_a_cluster_file_is_a_folder(two: Path) -> None:
    (two / "out" / "two.yaml").mkdir(parents=True)
    before = tree(two)
    assert errors(cli(two, "synth")) == [
        "error: --out = 'out/two.yaml': is a folder, where a file is to be written; fix: move the folder away, "
        "or write elsewhere"
    ]
    assert tree(two) == before  # one.yaml is not written either


def test_synth_out_with_a_link_that_leads_nowhere(two: Path) -> None:
    (two / "out").mkdir()
    (two / "out" / "two.yaml").symlink_to(two / "gone" / "two.yaml")
    before = tree(two)
    assert errors(cli(two, "synth")) == [
        f"error: --out = 'out/two.yaml': a link to {two.resolve()}/gone/two.yaml, whose folder does not exist; "
        "fix: remove the link, or create its target's folder"
    ]
    assert tree(two) == before


def test_synth_write_that_fails_at_write_time_leaves_nothing(two: Path) -> None:
    """What os.access cannot see (root may write anywhere): the write itself fails, here through a link to a file
    of /proc, where no file can be created. Nothing is half-written: not two.yaml, not one.yaml, no temporary file."""
    if not Path("/proc/version").is_file():
        pytest.skip("no /proc/version here")
    (two / "out").mkdir()
    (two / "out" / "two.yaml").symlink_to("/proc/version")
    before = tree(two)
    [line] = errors(cli(two, "synth"))
    assert line.startswith("error: --out = 'out/two.yaml': cannot be written: ")
    assert line.endswith("; fix: write elsewhere, or make it writable")
    assert tree(two) == before and not [p for p in Path("/proc").iterdir() if p.name.endswith(".tmp")]


def test_synth_writes_into_a_new_nested_folder_and_replaces_old_files(two: Path) -> None:
    (two / "deep").mkdir()
    (two / "deep" / "one.yaml").write_text("old\n")
    assert cli(two, "synth", "-o", "deep").returncode == 0
    assert (two / "deep" / "one.yaml").read_text() != "old\n"
    r = cli(two, "synth", "-o", "a/b/c")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (two / "a" / "b" / "c").iterdir()) == ["one.yaml", "two.yaml"]


# --- output paths: explain --svg, simulate --json/--trace/--html ---------------------------------------------------


def test_explain_svg_paths(two: Path) -> None:
    (two / "folder").mkdir()
    before = tree(two)
    assert errors(cli(two, "explain", "--svg", "nowhere/t.svg")) == [
        "error: --svg = 'nowhere/t.svg': its folder does not exist; fix: create nowhere first, or write the file "
        "elsewhere"
    ]
    assert errors(cli(two, "explain", "--svg", "folder")) == [
        "error: --svg = 'folder': is a folder, not a file; fix: name a file (in it, or elsewhere)"
    ]
    assert tree(two) == before
    r = cli(two, "explain", "--svg", "folder/t.svg")
    assert r.returncode == 0 and (two / "folder" / "t.svg").read_text().startswith("<svg")


def test_a_full_disk_is_the_machines_limit_exit_3(two: Path) -> None:
    if not os.access("/dev/full", os.W_OK):
        pytest.skip("no writable /dev/full here")
    r = cli(two, "explain", "--svg", "/dev/full")
    assert r.returncode == MACHINE_LIMIT == 3 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-2:] == [
        "error: --svg = '/dev/full': cannot be written: No space left on device; fix: free space (or quota) on its "
        "disk, or write elsewhere",
        "jaxinfra: 1 problem (the machine's limit); nothing written",
    ]


def test_simulate_checks_every_output_before_running(two: Path) -> None:
    (two / "folder").mkdir()
    before = tree(two)
    r = cli(
        two,
        "simulate",
        "stacks/one.py",
        "--no-logs",
        "--json",
        "folder",
        "--trace",
        "nowhere/t.json",
        "--html",
        "folder",
    )
    assert errors(r) == [
        "error: --json = 'folder': is a folder, not a file; fix: name a file (in it, or elsewhere)",
        "error: --trace = 'nowhere/t.json': its folder does not exist; fix: create nowhere first, or write the file "
        "elsewhere",
        "error: --html = 'folder': is a folder, not a file; fix: name a file (in it, or elsewhere)",
    ]
    assert r.stdout == "" and tree(two) == before  # stopped before anything ran
    (two / "r.json").symlink_to(two / "gone" / "r.json")
    assert errors(cli(two, "simulate", "stacks/one.py", "--no-logs", "--json", "r.json")) == [
        f"error: --json = 'r.json': a link to {two.resolve()}/gone/r.json, whose folder does not exist; "
        "fix: remove the link, or create its target's folder"
    ]


# --- not root: folders that cannot be written ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def can_drop() -> None:
    home = unprivileged.scratch_home()
    try:
        r = unprivileged.run(
            [sys.executable, "-c", "import os, jaxinfra; print(os.getuid())"],
            home,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError as err:
        pytest.skip(f"cannot run a command unprivileged here: {err}")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if r.returncode != 0 or r.stdout.strip() == "0":
        pytest.skip(f"cannot run a command unprivileged here: {r.stderr.strip()[-200:]}")


@pytest.fixture
def home(can_drop: None) -> Iterator[Path]:
    """The unprivileged user's folder with ./stacks (two stacks) and ./locked, a folder it cannot write."""
    folder = unprivileged.scratch_home()
    stack(folder / "stacks", "one")
    stack(folder / "stacks", "two")
    locked = folder / "locked"
    locked.mkdir()
    locked.chmod(0o555)  # root's when the suite runs as root (the user is then nobody), read-only otherwise
    for path in (folder / "stacks", *(folder / "stacks").iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    yield folder
    locked.chmod(0o755)
    shutil.rmtree(folder, ignore_errors=True)


def unprivileged_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return unprivileged.run(
        [sys.executable, "-m", "jaxinfra", *args], home, cwd=home, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["synth", "-o", "locked"], "--out = 'locked': not writable; fix: write elsewhere, or make it writable"),
        (
            ["synth", "-o", "locked/yaml"],
            "--out = 'locked/yaml': cannot be created: locked is not writable; fix: write elsewhere, or make it "
            "writable",
        ),
        (
            ["explain", "--svg", "locked/t.svg"],
            "--svg = 'locked/t.svg': its folder locked is not writable; fix: write the file elsewhere",
        ),
        (
            ["simulate", "--no-logs", "--json", "locked/r.json", "stacks/one.py"],
            "--json = 'locked/r.json': its folder locked is not writable; fix: write the file elsewhere",
        ),
        (
            ["simulate", "--no-logs", "--html", "locked/r.html", "stacks/one.py"],
            "--html = 'locked/r.html': its folder locked is not writable; fix: write the file elsewhere",
        ),
        (
            ["init", "locked/repo"],
            "DIR = 'locked/repo': cannot be created: locked is not writable; fix: write elsewhere, or make it writable",
        ),
        (["init", "locked"], "DIR = 'locked': not writable; fix: write elsewhere, or make it writable"),
    ],
    ids=["synth", "synth-new", "explain", "simulate-json", "simulate-html", "init-new", "init"],
)
def test_a_folder_the_user_cannot_write(home: Path, args: list[str], line: str) -> None:
    before = tree(home)
    r = unprivileged_cli(home, *args)
    assert errors(r) == [f"error: {line}"]
    assert r.stdout == "" and tree(home) == before


# --- init: failures at write time leave nothing -------------------------------------------------------------------


def test_init_that_fails_while_writing_leaves_nothing(tmp_path: Path) -> None:
    """A link in the way that the existence check cannot see (it leads nowhere): the write fails midway, and
    every file and folder written before it is removed again."""
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "infra").symlink_to(tmp_path / "gone")
    before = tree(tmp_path)
    [line] = errors(cli(tmp_path, "init", "repo"))
    assert line.startswith("error: DIR = 'repo/infra/__main__.py': cannot be written: ")
    assert tree(tmp_path) == before
    (tmp_path / "repo" / "infra").unlink()
    r = cli(tmp_path, "init", "repo")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "repo" / "stacks" / "training.py").is_file() and not list((tmp_path / "repo").rglob("*.tmp"))
