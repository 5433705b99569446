"""`jaxinfra init`: a ready repository for a team, from the templates in `jaxinfra/templates/`.

One stack (CPU, TPU, GPU, or GPU from flex-start capacity), the training program it runs (train/, with its
Dockerfile), its dependencies and the images table that lets `jaxinfra simulate --run-command` run that program, the
Pulumi and cdk8s entry points, a .gitignore and a CI workflow; the README it writes documents every
file. Nothing is overwritten: if any file
exists, every one of them is reported and nothing is written.
"""

from __future__ import annotations

from importlib import metadata, resources
from pathlib import Path
from string import Template

from jaxinfra.errors import JaxinfraError, OutputError, Problem, SpecError

#: The stack templates, by the name `--template` takes; the first is the default. `gpu-flex`: the gpu stack's job on a
#: flex-start pool (DWS queued provisioning, through Kueue).
TEMPLATES = ("cpu", "tpu", "gpu", "gpu-flex")

#: Every file written: its path in the new repository -> its template (`{template}`: the chosen one).
FILES: dict[str, str] = {
    "README.md": "README.md",
    "stacks/training.py": "stack_{template}.py",
    "train/train.py": "train/train.py",
    "train/Dockerfile": "train/Dockerfile",
    "train/README.md": "train/README.md",
    "pyproject.toml": "pyproject.toml",
    ".github/workflows/jaxinfra.yml": "workflow.yml",
    "Pulumi.yaml": "Pulumi.yaml",
    "Pulumi.training.yaml": "Pulumi.{template}.yaml",
    "infra/__main__.py": "infra_main.py",
    "cdk8s.yaml": "cdk8s.yaml",
    "package.json": "package.json",
    "package-lock.json": "package-lock.json",
    ".gitignore": "gitignore",
}
#: Templates with `$template` / `$version` placeholders (the others hold `$` of their own, e.g. `${{ }}`).
SUBSTITUTED = frozenset({"README.md", "pyproject.toml"})


class ExistingFiles(JaxinfraError):
    """`jaxinfra init` would overwrite files."""

    kind = "files exist"


def version() -> str:
    """The installed jaxinfra's version, which the new repository pins."""
    return metadata.version("jaxinfra")


def version_line() -> str:
    """`jaxinfra --version`'s line: the installed distribution's version (no typer, no pydantic: it is instant)."""
    try:
        return f"jaxinfra {version()}"
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "jaxinfra (version unknown: not installed)"


def render(template: str) -> dict[str, str]:
    """Every file of a new repository: path -> text. Pure: the same template and jaxinfra, the same bytes."""
    if template not in TEMPLATES:
        raise SpecError([Problem("--template", template, "unknown template", f"use one of {', '.join(TEMPLATES)}")])
    folder = resources.files("jaxinfra") / "templates"
    values = {"template": template, "version": version()}
    out = {}
    for target, source in FILES.items():
        text = (folder / source.format(template=template)).read_text(encoding="utf-8")
        out[target] = Template(text).substitute(values) if source in SUBSTITUTED else text
    return out


def write(directory: Path, template: str = TEMPLATES[0]) -> list[Path]:
    """Write a new repository into `directory` (created if missing); refuses, listing them, if any file exists."""
    files = render(template)
    targets = [directory / path for path in files]
    blocking = {
        p: None
        for t in targets
        for p in (*reversed(t.parents), t)
        if (p == t and p.exists()) or (p != t and p.exists() and not p.is_dir())
    }  # ordered, no repeats
    if blocking:
        raise ExistingFiles(
            [
                Problem(
                    str(path),
                    "directory" if path.is_dir() else "file",
                    "would be overwritten; jaxinfra init never overwrites",
                    "run it in an empty folder, or move this away first",
                )
                for path in blocking
            ]
        )
    from jaxinfra import outputs

    if problems := outputs.check(folders={"DIR": (directory, list(files))}):
        raise OutputError(problems)
    outputs.write([("DIR", target, text) for target, text in zip(targets, files.values())])  # all or nothing
    return targets
