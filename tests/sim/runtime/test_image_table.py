"""The images table of a project's pyproject.toml (`[tool.jaxinfra.simulate.images]`, IMAGE = "PATH" relative to
it): what `jaxinfra simulate` takes when no `--image` names that image, as a team's repository uses it with jaxinfra
installed from its wheel (tests/support/fresh_venv.py), outside this checkout; and what is not a table of paths is
one line naming its key, exit 2, never a traceback."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sim.runtime.test_images import NAME, REPORT, app_image, container
from tests.sim.runtime.test_sandbox import pods, seen
from tests.support import images
from tests.support.fresh_venv import CLEAN_ENV
from tests.test_init import fresh_venv  # noqa: F401  (the session's venv, a fixture)

pytestmark = pytest.mark.simulator

ARCHIVED = "registry.example/app-archived:v1"
KEY = "pyproject.toml [tool.jaxinfra.simulate.images]"


def project(root: Path) -> Path:
    """A team's repository: the image as an OCI layout and as a `docker save` archive under images/, named in the
    table by paths relative to it, and a manifest of one Job per image."""
    root.mkdir()
    images.layout(root / "images" / "app", app_image())
    images.docker_archive(root / "images" / "app", root / "images" / "app.tar", ARCHIVED)
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "team"\nversion = "0"\n\n[tool.jaxinfra.simulate.images]\n'
        f'"{NAME}" = "images/app"\n"{ARCHIVED}" = "images/app.tar"\n'
    )
    jobs = []
    for name, image in (("layout", NAME), ("archive", ARCHIVED)):
        job = container()
        job["metadata"]["name"] = name
        job["spec"]["template"]["spec"]["containers"][0]["image"] = image
        jobs.append(json.dumps(job))
    (root / "jobs.yaml").write_text("\n---\n".join(jobs))
    return root


def test_a_wheel_installed_jaxinfra_takes_the_images_table_of_the_users_project(
    fresh_venv: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """From the project's folder, with no --image: each Job's container runs its image's Entrypoint and Cmd (the
    image as a layout and as an archive, found by the table's relative paths); the unpack cache is XDG_CACHE_HOME's."""
    root = project(tmp_path / "team")
    r = subprocess.run(
        [str(fresh_venv / "bin/jaxinfra"), "simulate", "jobs.yaml", "--run-command", "--json", "report.json"],
        cwd=root,
        env={**CLEAN_ENV, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Traceback" not in out, out
    report = json.loads((root / "report.json").read_text())
    for pod in ("layout-0", "archive-0"):
        got = seen(pods(report)[pod])
        assert (got["ARGV"], got["CWD"], got["GREETING"], got["PYTHON"]) == ("from-cmd", "/srv", "from-image", "absent")
    assert len(list((tmp_path / "cache" / "jaxinfra" / "images" / "unpacked").iterdir())) >= 1


def test_an_image_given_on_the_command_line_wins_over_the_table(tmp_path: Path) -> None:
    """`--image IMAGE=PATH` replaces the table's PATH for IMAGE (here a layout whose Cmd says so)."""
    root = project(tmp_path / "team")
    images.layout(root / "other", dataclasses.replace(app_image(), cmd=[REPORT, "from-flag"]))
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "simulate", "jobs.yaml", "--run-command", "--json", "report.json"]
        + ["--image", f"{NAME}=other"],
        cwd=root,
        env={**os.environ, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads((root / "report.json").read_text())
    assert seen(pods(report)["layout-0"])["ARGV"] == "from-flag"
    assert seen(pods(report)["archive-0"])["ARGV"] == "from-cmd"


@pytest.mark.parametrize(
    ("table", "line"),
    [
        (
            '[tool.jaxinfra.simulate]\nimages = "images/app"\n',
            f"error: {KEY} = 'images/app': not a table; fix: write it as a table of IMAGE = \"PATH\"",
        ),
        (
            "[tool.jaxinfra]\nsimulate = 3\n",
            "error: pyproject.toml [tool.jaxinfra.simulate] = 3: not a table; fix: write [tool.jaxinfra.simulate] as",
        ),
        (
            '[tool.jaxinfra.simulate.images]\n"app:v1" = 3\n',
            f"error: {KEY} 'app:v1' = 3: expected a path (a string)",
        ),
        (
            '[tool.jaxinfra.simulate.images]\n"app:v1" = "images/missing"\n',
            f"error: {KEY} 'app:v1' = 'images/missing': no such folder or file; fix: give the folder",
        ),
    ],
    ids=["images-not-a-table", "simulate-not-a-table", "not-a-path", "missing"],
)
def test_a_malformed_images_table_is_one_line_naming_its_key(tmp_path: Path, table: str, line: str) -> None:
    (tmp_path / "pyproject.toml").write_text(table)
    (tmp_path / "job.yaml").write_text(json.dumps(container(command=["true"])))
    r = subprocess.run(
        [sys.executable, "-m", "jaxinfra", "simulate", "job.yaml", "--run-command", "--no-logs"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "Traceback" not in out, out
    [error] = [x for x in r.stderr.splitlines() if x.startswith("error: ")]
    assert error.startswith(line), error
