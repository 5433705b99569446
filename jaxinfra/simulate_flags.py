"""What the `jaxinfra simulate` command's flags become: the fault and capacity rehearsals (--kill, --fail, --hang,
--delay, --preempt, --provision), the images (--image and the images table of the project's pyproject.toml), the
volumes (--volume) and the hostPath mappings (--host-path). Every malformed value is a problem naming the flag, all at
once (`SpecError`, exit 2); the simulator's modules are imported only here, when the command runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jaxinfra.errors import Problem, SpecError


def _seconds(text: str) -> float | None:
    """A non-negative number of seconds, or None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value >= 0 and value != float("inf") else None


def faults(
    kill: list[str], fail: list[str], hang: list[str], delay: list[str], preempt: list[str], provision: list[str]
) -> Any:
    """Parse POD@SECONDS / POD=SECONDS fault options and CHECK@SECONDS / CHECK@never capacity rehearsals; every
    malformed one is reported."""
    from jaxinfra_sim.core.options import Faults

    problems: list[Problem] = []

    def timed(values: list[str], sep: str, flag: str) -> dict[str, float]:
        out = {}
        for v in values:
            pod, _, secs = v.rpartition(sep)
            try:
                out[pod] = float(secs)
                if not pod or out[pod] < 0:
                    raise ValueError
            except ValueError:
                problems.append(
                    Problem(
                        flag,
                        v,
                        f"expected POD{sep}SECONDS",
                        f"e.g. {flag} train-0{sep}2.5 (POD is a hostname or a rank)",
                    )
                )
        return out

    provisioned: dict[str, float | None] = {}
    for v in provision:
        check, _, when = v.rpartition("@")
        seconds = _seconds(when) if when != "never" else None
        if not check or (when != "never" and seconds is None):
            problems.append(
                Problem(
                    "--provision",
                    v,
                    "expected CHECK@SECONDS or CHECK@never",
                    "e.g. --provision dws-prov@600 (its capacity provisioned after 10 minutes) or --provision "
                    "dws-prov@never (CHECK: a Kueue AdmissionCheck's name)",
                )
            )
        provisioned[check] = seconds
    faults = Faults(
        provision=provisioned,
        kill=timed(kill, "@", "--kill"),
        delay=timed(delay, "=", "--delay"),
        preempt=timed(preempt, "@", "--preempt"),
        fail=frozenset(fail),
        hang=frozenset(hang),
    )
    if problems:
        raise SpecError(problems)
    return faults


def _folders(values: list[str], flag: str, name_of: str, example: str, problems: list[Problem]) -> dict[str, Path]:
    """NAME=DIR pairs of a repeatable option; every malformed one is a problem."""
    found = {}
    for value in values:
        name, sep, folder = value.partition("=")
        if not (sep and name and folder):
            problems.append(Problem(flag, value, f"expected {name_of}=DIR", f"e.g. {example}"))
            continue
        found[name] = Path(folder)
    return found


def images(values: list[str], volumes: list[str]) -> tuple[dict[str, Path], dict[str, Path]]:
    """--image IMAGE=PATH (defaults: [tool.jaxinfra.simulate.images] of ./pyproject.toml, relative to it): a folder
    (the image's top layer over this machine's system), an OCI image layout or a `docker save` archive (the image
    itself: `load_images`); and
    --volume NAME=DIR (created where missing when a pod mounts it: it is meant to outlive the simulation)."""
    problems: list[Problem] = []
    images, where = _table_images(problems)
    given = _folders(
        values, "--image", "IMAGE", "--image python:3.11=examples/train (IMAGE as written in the manifest)", problems
    )
    images |= given
    where |= dict.fromkeys(given, "--image")
    claims = _folders(
        volumes,
        "--volume",
        "NAME",
        "--volume checkpoints=./ckpt (a PersistentVolumeClaim's or a GCS bucket's name)",
        problems,
    )
    from jaxinfra_sim.runtime import oci_image

    problems += [
        Problem(
            where[image],
            f"{image}={folder}" if where[image] == "--image" else str(folder),
            "no such folder or file" if not folder.exists() else "neither a folder nor a `docker save` archive",
            "give the folder that holds the image's code, an OCI image layout (skopeo copy ... oci:DIR) or the file "
            "`docker save` / `podman save` wrote",
        )
        for image, folder in images.items()
        if oci_image.kind(folder) is None
    ]
    problems += [
        Problem("--volume", f"{name}={folder}", "not a folder", "give a folder (it is created if missing)")
        for name, folder in claims.items()
        if folder.exists() and not folder.is_dir()
    ]
    if problems:
        raise SpecError(problems)
    # A missing one is made by the simulator's kubelet when a pod first mounts it, as the container's root's.
    return {image: folder.resolve() for image, folder in images.items()}, {
        name: folder.resolve() for name, folder in claims.items()
    }


IMAGE_LIMITS = {"size": "an image's unpacked bytes", "files": "an image's files", "cache": "the cache's bytes"}
"""The keys of --image-limits, each what it bounds (`image_cache.Bounds`)."""


def image_limits(values: list[str]) -> Any:
    """--image-limits KEY=QUANTITY,... (size=20Gi, files=500000, cache=64Gi) as `image_cache.Bounds`, its defaults
    for what is not given; every bad one a problem (exit 2)."""
    from jaxinfra import quantity
    from jaxinfra_sim.runtime.image_cache import Bounds

    fields = {"size": "image_bytes", "files": "image_files", "cache": "cache_bytes"}
    given: dict[str, int] = {}
    problems = []
    for item in (i for v in values for i in v.split(",") if i):
        key, _, text = item.partition("=")
        number = quantity.parse(text)
        if key not in IMAGE_LIMITS or number is None or number <= 0 or number.denominator != 1:
            known = ", ".join(f"{k} ({what})" for k, what in IMAGE_LIMITS.items())
            why = f"expected KEY=QUANTITY, KEY one of {known}"
            problems.append(Problem("--image-limits", item, why, "e.g. size=20Gi"))
            continue
        given[fields[key]] = int(number)
    if problems:
        raise SpecError(problems)
    return Bounds(**given)


def load_images(images: Mapping[str, Path], run_command: bool, egress: bool, bounds: Any = None) -> dict[str, Any]:
    """Each image of `images`: a folder as it is, an OCI image layout or a `docker save` archive unpacked once into a
    cache within `bounds` (`oci_image.load`, whose `ImageError` is one line, exit 2). Unpacking is the first thing a
    run asks of this machine: every part the run will use is checked first, all at once (`jaxinfra_sim.node.parts`,
    exit 3)."""
    from jaxinfra_sim.node import parts
    from jaxinfra_sim.runtime import oci_image

    kinds = {image: oci_image.kind(folder) for image, folder in images.items()}  # (an archive's: its header read)
    if set(kinds.values()) - {"folder"}:
        parts.require(parts.uses(run_command, egress, kinds.values()))
    return {
        image: folder if kinds[image] == "folder" else oci_image.load(image, folder, bounds=bounds)
        for image, folder in images.items()
    }


def _table_images(problems: list[Problem]) -> tuple[dict[str, Path], dict[str, str]]:
    """The images table of ./pyproject.toml (`[tool.jaxinfra.simulate.images]`, IMAGE = "PATH", relative to it) and,
    per image, the key a problem with it names; what is not a table of paths is a problem naming its key."""
    from jaxinfra import stack

    key = f"{stack.PROJECT} [tool.jaxinfra.simulate]"
    table = stack.settings().get("simulate", {})
    if not isinstance(table, dict):
        problems.append(Problem(key, table, "not a table", "write [tool.jaxinfra.simulate] as a table"))
        return {}, {}
    key, table = f"{key[:-1]}.images]", table.get("images", {})
    if not isinstance(table, dict):
        fix = 'write it as a table of IMAGE = "PATH" (e.g. "python:3.11" = "images/train")'
        problems.append(Problem(key, table, "not a table", fix))
        return {}, {}
    images = {}
    for image, path in table.items():
        if isinstance(path, str) and path:
            images[image] = Path(path)
        else:
            problems.append(Problem(f"{key} {image!r}", path, "expected a path (a string)", 'e.g. "images/train"'))
    return images, {image: f"{key} {image!r}" for image in images}


def host_paths(values: list[str]) -> dict[str, Path]:
    """--host-path PATH=DIR: the hostPath PATH (the manifest's string, exactly) is this machine's DIR, which must
    exist (nothing of the machine is created for a manifest) and may not be one of its kernel filesystems (a
    container could change the machine's settings through them: a hostPath of /sys or /proc/sys already shows the
    container's own, read-only)."""
    if not values:
        return {}
    import os

    from jaxinfra_sim.core import paths

    problems: list[Problem] = []
    example = "--host-path /run/tcpx=./tcpx (PATH as written in the manifest's hostPath.path)"
    found = {}
    for value in values:
        path, sep, folder = value.partition("=")
        if not (sep and path and folder):
            problems.append(Problem("--host-path", value, "expected PATH=DIR", f"e.g. {example}"))
        elif ".." in path.split("/"):
            problems.append(
                Problem("--host-path", value, "the API server refuses such a hostPath (it contains '..')", example)
            )
        elif paths.kernel_view(path) is not None:
            problems.append(
                Problem(
                    "--host-path",
                    value,
                    f"a hostPath of {path} already shows the container's own {paths.kernel_view(path)}, read-only",
                    "drop this --host-path",
                )
            )
        elif not Path(folder).exists():
            problems.append(
                Problem("--host-path", value, f"no such folder or file: {folder}", "create it first, or name one")
            )
        elif (real := os.path.realpath(folder)).split("/")[1:2] in (["proc"], ["sys"]):
            problems.append(
                Problem(
                    "--host-path",
                    value,
                    f"{real} is a kernel filesystem of this machine: a container could change its settings",
                    "map the hostPath to a folder of your own",
                )
            )
        else:
            found[path] = Path(folder).resolve()
    if problems:
        raise SpecError(problems)
    return found
