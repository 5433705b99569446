"""`jaxinfra init`: a ready repository whose own CI commands pass in a fresh venv, and that is never overwritten."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxinfra import init, manifests, stack
from jaxinfra.yamlio import load
from tests.support import fresh_venv as fresh_venv_module
from tests.support.fresh_venv import CLEAN_ENV
from tests.support.paths import ROOT

pytestmark = pytest.mark.adapters

WORKFLOW = ".github/workflows/jaxinfra.yml"


def jaxinfra(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jaxinfra", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def steps(repo: Path) -> dict[str, dict[str, Any]]:
    [job] = yaml.safe_load((repo / WORKFLOW).read_text())["jobs"].values()
    return {s.get("name", s.get("uses", "")): s for s in job["steps"]}


def run_step(step: dict[str, Any], repo: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """A workflow step's `run`, as a GitHub runner runs it (bash -eo pipefail), in the repository."""
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=600,
        env={**CLEAN_ENV, **step.get("env", {}), **env},
    )


@pytest.mark.parametrize("template", init.TEMPLATES)
def test_init_writes_every_file_once_and_documents_each(template: str, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    r = jaxinfra("init", str(repo), "--template", template, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    written = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file())
    assert written == sorted(init.FILES)
    readme = (repo / "README.md").read_text()
    assert (
        all(f"`{path}`" in readme for path in init.FILES if path != "infra/__main__.py")
        and "`infra/__main__.py`" in readme
    )
    assert f"--template {template}" in readme and "$" not in readme.replace("${{", "")
    project = tomllib.loads((repo / "pyproject.toml").read_text())
    assert project["project"]["dependencies"][0] == f"jaxinfra[validate,sim]=={init.version()}"
    assert set(project["tool"]["jaxinfra"]["simulate"]["images"].values()) == {"train"}  # the program init wrote
    assert (repo / "train/train.py").read_bytes() == (ROOT / "train/train.py").read_bytes()
    cluster = stack.load(repo / "stacks/training.py")  # a valid stack of the chosen kind
    kind, _, capacity = template.partition("-")
    assert cluster.node_pools[0].accelerator.kind == kind
    assert cluster.node_pools[0].capacity == {"flex": "flex-start"}.get(capacity, "on-demand")


def test_second_init_refuses_and_lists_every_file(tmp_path: Path) -> None:
    assert jaxinfra("init", "repo", cwd=tmp_path).returncode == 0
    (tmp_path / "repo/stacks/training.py").write_text("# the team's own edits\n")
    r = jaxinfra("init", "repo", "--template", "tpu", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert [line.split(" = ")[0] for line in r.stderr.splitlines()[:-1]] == [f"error: repo/{p}" for p in init.FILES]
    assert r.stderr.splitlines()[-1] == f"jaxinfra: {len(init.FILES)} problems (files exist); nothing written"
    assert (tmp_path / "repo/stacks/training.py").read_text() == "# the team's own edits\n"


def test_init_refuses_a_file_where_a_folder_goes(tmp_path: Path) -> None:
    (tmp_path / "stacks").write_text("")
    r = jaxinfra("init", ".", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("error: stacks = 'file': would be overwritten")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stacks"]
    r = jaxinfra("init", ".", "--template", "arm", cwd=tmp_path)
    assert r.returncode == 2
    assert "--template = 'arm': unknown template; fix: use one of cpu, tpu, gpu, gpu-flex" in r.stderr


def test_workflow_passes_offline_linters(tmp_path: Path) -> None:
    """GitHub's workflow schema (check-jsonschema's vendored copy) and zizmor's audits, pedantic, offline."""
    init.write(tmp_path)
    workflow = tmp_path / WORKFLOW
    bin_dir = Path(sys.executable).parent
    r = subprocess.run(
        [str(bin_dir / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(workflow)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(
        [str(bin_dir / "zizmor"), "--offline", "--persona", "pedantic", "--no-progress", str(workflow)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "No findings" in r.stdout, r.stdout + r.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(workflow.read_text().replace("runs-on:", "runs_on:"))
    r = subprocess.run(
        [str(bin_dir / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(broken)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1  # the linter does reject a broken workflow


def test_workflow_opens_user_namespaces_before_simulating(tmp_path: Path) -> None:
    """Hosted ubuntu-24.04 runners restrict unprivileged user namespaces (docs/sandbox.md, "Who can run it")."""
    init.write(tmp_path)
    names = list(steps(tmp_path))
    [sysctl] = [n for n, s in steps(tmp_path).items() if "sysctl" in s.get("run", "")]
    assert steps(tmp_path)[sysctl]["run"] == "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
    assert names.index(sysctl) < names.index("Simulate")
    assert steps(tmp_path)["Install the simulator's parts"]["run"] == ".venv/bin/jaxinfra doctor --install"
    assert names.index("Install") < names.index("Install the simulator's parts") < names.index("Simulate")
    assert yaml.safe_load((tmp_path / WORKFLOW).read_text())["jobs"]["jaxinfra"]["runs-on"] == "ubuntu-24.04"


def test_pinned_cdk8s_cli_is_the_checkouts() -> None:
    """The same CLI and the same dependency tree: `npm install` in a new repository installs what the checkout's
    `npm ci` does for its cdk8s CLI (and works offline from that cache, as the README test runs it)."""
    ours = json.loads((ROOT / "package.json").read_text())["devDependencies"]["cdk8s-cli"]
    files = init.render("cpu")
    assert json.loads(files["package.json"])["devDependencies"] == {"cdk8s-cli": ours}
    lock, checkout = json.loads(files["package-lock.json"]), json.loads((ROOT / "package-lock.json").read_text())
    assert lock["name"] == json.loads(files["package.json"])["name"] == lock["packages"][""]["name"]
    cli_tree = {k: v for k, v in lock["packages"].items() if k}
    assert "node_modules/cdk8s-cli" in cli_tree
    assert cli_tree == {k: v for k, v in checkout["packages"].items() if k in cli_tree}  # the checkout's, same pins
    assert lock["packages"][""]["devDependencies"] == {"cdk8s-cli": ours}


def test_train_is_what_init_writes() -> None:
    """The checkout's train/ (the program its stacks' images hold) is the one `jaxinfra init` writes, byte for
    byte: one program, kept in the package's templates for init and at the root for the stacks."""
    files = init.render("cpu")
    written = {path: text for path, text in files.items() if path.startswith("train/")}
    ours = {f"train/{p.name}": p.read_text(encoding="utf-8") for p in (ROOT / "train").iterdir() if p.is_file()}
    assert written and ours == written


@pytest.mark.parametrize("template", init.TEMPLATES)
def test_pulumi_stack_config_is_the_programs(template: str, tmp_path: Path) -> None:
    pytest.importorskip("pulumi")
    from jaxinfra.pulumi import read_settings

    init.write(tmp_path, template)
    assert yaml.safe_load((tmp_path / "Pulumi.yaml").read_text())["main"] == "infra/"
    config = yaml.safe_load((tmp_path / "Pulumi.training.yaml").read_text())["config"]
    settings = read_settings(config, root=tmp_path)
    assert settings.stack == tmp_path / "stacks/training.py" and settings.provider == "gke"


def test_cdk8s_app_of_the_new_repository(tmp_path: Path) -> None:
    """cdk8s.yaml's app (`python -m jaxinfra.cdk8s`) writes what `jaxinfra synth` writes."""
    pytest.importorskip("cdk8s")
    if not shutil.which("node"):
        pytest.skip("no node for jsii")
    init.write(tmp_path, "tpu")
    app = yaml.safe_load((tmp_path / "cdk8s.yaml").read_text())["app"]
    assert app == ".venv/bin/python -m jaxinfra.cdk8s"
    out = tmp_path / "dist"
    env = {**os.environ, "CDK8S_OUTDIR": str(out), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra.cdk8s"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert load((out / "training.k8s.yaml").read_text()) == manifests(stack.load(tmp_path / "stacks/training.py"))


# --- the workflow's own commands, in a fresh venv -------------------------------------------------------------


@pytest.fixture(scope="session")
def fresh_venv(request: pytest.FixtureRequest) -> Path:
    """A new venv with jaxinfra installed from a wheel of this checkout (so package data is what ships), with every
    extra a scaffold's README installs and what its train/ needs: built once per session, in the background from the
    start of the session (tests/support/fresh_venv.py, started by conftest)."""
    pytest.importorskip("jax")
    return fresh_venv_module.wait(request.config.stash[fresh_venv_module.BASE])


@pytest.mark.parametrize("template", init.TEMPLATES)
def test_workflow_commands_pass_in_the_new_repository(template: str, fresh_venv: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    r = subprocess.run(
        [str(fresh_venv / "bin/jaxinfra"), "init", str(repo), "--template", template],
        capture_output=True,
        text=True,
        timeout=120,
        env=CLEAN_ENV,
    )
    assert r.returncode == 0, r.stderr
    (repo / ".venv").symlink_to(fresh_venv)  # the workflow's Install step, done once for the session
    ran = steps(repo)
    for name in ("Synthesize", "Validate", "Install the simulator's parts", "Simulate"):  # (all there: a check)
        done = run_step(ran[name], repo)
        assert done.returncode == 0, f"{name}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    assert sorted(p.name for p in (repo / "out").glob("*.yaml")) == ["training.yaml"]
    assert (repo / "out/shadow/training.yaml").is_file()
    report = json.loads((repo / "simulation.json").read_text())
    assert report["ok"] and [w["verdict"] for w in report["workloads"]] == ["succeeded"]


def test_workflow_diff_step_reports_against_the_base_branch(fresh_venv: Path, tmp_path: Path) -> None:
    """The base branch checked out in .base: an unchanged stack diffs clean, a changed one names the field,
    and the step summary gets the same text."""
    repo = tmp_path / "repo"
    init.write(repo)
    (repo / ".venv").symlink_to(fresh_venv)
    shutil.copytree(repo / "stacks", repo / ".base/stacks")
    training = repo / "stacks/training.py"
    training.write_text(training.read_text().replace("max_restarts=1,", "max_restarts=4,"))
    (repo / "stacks/extra.py").write_text(training.read_text().replace('name="training"', 'name="extra"'))
    summary = tmp_path / "summary.md"
    done = run_step(steps(repo)["Diff against the base branch"], repo, GITHUB_STEP_SUMMARY=str(summary))
    assert done.returncode == 0, done.stderr
    diff = (repo / "diff.md").read_text()
    assert summary.read_text() == diff
    assert "#### stacks/extra.py\nA new stack: every object is added." in diff
    assert "failurePolicy.maxRestarts" in diff and "jaxinfra: " in diff


# --- the scaffold README's own commands, from the scaffold's folder, with the wheel's jaxinfra
# -------------------------

PULUMI_UP = ROOT / "tests" / "support" / "pulumi_up_mocked.py"  # run as a program, by the fresh venv's Python


def readme_commands(repo: Path) -> list[str]:
    """The command lines of the README's "From laptop to cluster" block, comments dropped."""
    text = (repo / "README.md").read_text()
    block = text.split("## From laptop to cluster", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


@pytest.mark.parametrize("template", init.TEMPLATES)
def test_readme_commands_pass_in_the_new_repository(template: str, fresh_venv: Path, tmp_path: Path) -> None:
    """Every command of the scaffold's README, as written, from its folder: the venv (the wheel's jaxinfra), explain,
    simulate with no argument, the program itself and its kill and preemption rehearsals (the CPU template, whose
    claim and restart make them resume), synth, validate, the shadow, diff, cdk8s synth (the CPU template, where Node
    is) and the Pulumi program under mocks. `kubectl apply` needs a cluster: the file it applies is checked to exist."""
    repo = tmp_path / "repo"
    init.write(repo, template)
    (repo / ".venv").symlink_to(fresh_venv)
    env = {**CLEAN_ENV, "CDK8S_CHECK_UPGRADE": "false"}
    ran = []
    for line in readme_commands(repo):
        if line.startswith("python3 -m venv .venv && "):
            line = line.removeprefix("python3 -m venv .venv && ")  # the venv: made once for the session
        if "--run-command" in line and template != "cpu":
            continue  # the accelerator templates' program runs on the CPU template; 16 CPU devices cost minutes
        if line.startswith("kubectl apply"):
            assert (repo / line.split(" -f ", 1)[1].split()[0]).is_file(), line
            continue
        if line.startswith("npm install"):
            if template != "cpu" or not (shutil.which("node") and shutil.which("npm")):
                continue  # the cdk8s files are the same in every template (test_cdk8s renders every stack through them)
            line = line.replace(
                "npm install", "npm install --offline --no-audit --no-fund"
            )  # npm's cache: .ci/run's npm ci
        if line.startswith("pulumi up"):
            line = f"{fresh_venv}/bin/python {PULUMI_UP} training"
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", line],
            capture_output=True,
            text=True,
            cwd=repo,
            timeout=600,
            env=env,
        )
        assert done.returncode == 0, f"{line}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
        assert "Traceback" not in done.stdout + done.stderr, line
        ran.append((line, done))
    synthesized = load((repo / "out/training.yaml").read_text())
    assert load((repo / "shadow/training.yaml").read_text()) != synthesized
    if (repo / "dist").exists():
        assert load((repo / "dist/training.k8s.yaml").read_text()) == synthesized
    [(_, up)] = [(line, done) for line, done in ran if str(PULUMI_UP) in line]
    assert json.loads(up.stdout)["jobNames"] == ["train"]
    rehearsals = [done.stdout + done.stderr for line, done in ran if "--kill" in line or "--preempt" in line]
    assert len(rehearsals) == (2 if template == "cpu" else 0)
    assert all("attempt 1: succeeded" in out or "succeeded" in out for out in rehearsals)
