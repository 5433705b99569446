"""Images as a cluster runs them (simulate/jaxinfra_sim/runtime/oci_image.py): an OCI image layout and a `docker save`
archive given to `--image NAME=PATH` are the container's whole root under runc, their config applied as containerd
applies it (Entrypoint and Cmd unless `command` and `args`, WorkingDir, Env under the pod's, User unless runAsUser);
an unsafe layer is refused with one line, the machine unchanged. Images are built offline from Debian's
`busybox-static` (tests/support/images.py); each test runs as root and as uid 65534."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jaxinfra_sim.node import parts
from jaxinfra_sim.runtime import image_config, oci_image
from tests.sim.runtime.test_sandbox import MODES, pods, seen, sim_argv, simulate
from tests.support import images, unprivileged

pytestmark = pytest.mark.simulator  # .ci/run installs umoci, skopeo, runc and busybox-static: never skipped

NAME = "registry.example/app:v1"
PASSWD = "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\n"
REPORT = (
    'echo ARGV="$0 $*" >&2; echo CWD="$(pwd)" >&2; echo UID="$(id -u):$(id -g)" >&2; '
    'echo GREETING="$GREETING" >&2; echo MODE="$MODE" >&2; echo PATHVAR="$PATH" >&2; '
    "test -e /usr/bin/python3 && echo PYTHON=seen >&2 || echo PYTHON=absent >&2; "
    'test -e /etc/os-release && echo OSREL=seen >&2 || echo OSREL=absent >&2; echo HOME="$HOME" >&2; '
    'echo JAXDEV="${JAX_NUM_CPU_DEVICES-unset}" >&2'
)
"""What the image's Cmd reports: its argv, working directory, ids, env, and whether this machine's files are there."""


def app_image() -> images.Spec:
    return images.Spec(
        layers=[
            images.busybox_layer(
                PASSWD,
                [
                    images.Entry("home", "dir", mode=0o755),
                    images.Entry("home/app", "dir", mode=0o755, uid=1000, gid=1000),
                    images.Entry("srv", "dir", mode=0o777),
                ],
            )
        ],
        entrypoint=["/bin/sh", "-c"],
        cmd=[REPORT, "from-cmd"],
        working_dir="/srv",
        env=["PATH=/bin", "GREETING=from-image", "MODE=image"],
        user="app",
    )


@pytest.fixture
def home() -> Iterator[Path]:
    """The unprivileged user's scratch HOME; beside it, root's own cache folder (`cache_env`)."""
    folder = unprivileged.scratch_home()
    yield folder
    subprocess.run(["rm", "-rf", str(folder), f"{folder}-root"], check=False)


def _cache(home: Path, as_root: bool) -> Path:
    """The image cache of a simulation run as `cache_env` says."""
    return Path(unprivileged.cache_env(home, as_root).get("XDG_CACHE_HOME", home / ".cache")) / "jaxinfra" / "images"


def _given(home: Path, kind: str, spec: images.Spec) -> Path:
    """The image as `kind` ("layout", "archive" or "oci-archive"), readable by the unprivileged user."""
    layout = home / f"layout-{secrets.token_hex(4)}"
    images.layout(layout, spec)
    path = layout
    if kind == "archive":
        path = home / f"{layout.name}.tar"
        images.docker_archive(layout, path, NAME)
        shutil.rmtree(layout)
    elif kind == "oci-archive":
        path = home / f"{layout.name}.oci.tar"
        images.oci_archive(layout, path)
        shutil.rmtree(layout)
    subprocess.run(["chmod", "-R", "a+rX", str(path)], check=True)
    return path


def container(**fields: Any) -> dict[str, Any]:
    """A one-pod Indexed Job of the image, its container `fields` (no command unless given)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "img"},
        "spec": {
            "completionMode": "Indexed",
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": NAME, **fields}]}},
        },
    }


def run(home: Path, path: Path, as_root: bool, **fields: Any) -> tuple[int, dict[str, str], str]:
    env = unprivileged.cache_env(home, as_root)
    rc, report, out = simulate(home, [container(**fields)], "--image", f"{NAME}={path}", as_root=as_root, env=env)
    pod = pods(report)["img-0"]
    return rc, {**seen(pod), "REPORTED": "{uid}:{gid}".format(**pod["security"])}, out


@pytest.mark.parametrize("kind", ["layout", "archive", "oci-archive"])
@MODES
def test_a_container_without_command_runs_the_images_entrypoint_and_cmd(home: Path, as_root: bool, kind: str) -> None:
    """Entrypoint + Cmd, in WorkingDir, as User (its uid and gid from the image's /etc/passwd), with the image's Env
    under containerd's default PATH; the container's root is the image's: this machine's Python and /etc/os-release
    are not in it, and nothing of the simulator's env (its Python's PATH, HOME, JAX_NUM_CPU_DEVICES) is added. skopeo's
    blob-info cache (an archive's conversion) never lands in this machine's /var/lib/containers, and nothing is left
    in its /var/tmp (where skopeo would unpack an OCI archive without the --tmpdir the simulator gives it)."""
    machine = [Path("/var/lib/containers"), Path("/var/tmp")]
    before = [sorted(p.rglob("*")) if p.exists() else None for p in machine]
    rc, got, out = run(home, _given(home, kind, app_image()), as_root)
    assert [sorted(p.rglob("*")) if p.exists() else None for p in machine] == before
    assert rc == 0, out
    assert got["ARGV"] == "from-cmd", got
    assert (got["CWD"], got["UID"], got["GREETING"], got["PATHVAR"]) == ("/srv", "1000:1000", "from-image", "/bin")
    assert got["REPORTED"] == "1000:1000", got  # the report's identity is the one it ran as
    assert (got["PYTHON"], got["OSREL"], got["JAXDEV"]) == ("absent", "absent", "unset"), got
    assert got["HOME"] == "/home/app", got  # runc's, from the image's /etc/passwd


@MODES
def test_args_replace_cmd_and_command_replaces_entrypoint(home: Path, as_root: bool) -> None:
    """`args` replace Cmd (the Entrypoint stays); `command` replaces the Entrypoint and drops Cmd; `workingDir`,
    `runAsUser` and the pod's env win over WorkingDir, User and the image's Env."""
    path = _given(home, "layout", app_image())
    rc, got, out = run(home, path, as_root, args=[REPORT, "from-args"])
    assert rc == 0, out
    assert (got["ARGV"], got["UID"]) == ("from-args", "1000:1000"), got
    rc, got, out = run(
        home,
        path,
        as_root,
        command=["/bin/sh", "-c", REPORT, "from-command"],
        workingDir="/tmp",
        env=[{"name": "MODE", "value": "pod"}],
        securityContext={"runAsUser": 0},
    )
    assert rc == 0, out
    assert (got["ARGV"], got["CWD"], got["UID"]) == ("from-command", "/tmp", "0:0"), got
    assert (got["MODE"], got["GREETING"]) == ("pod", "from-image"), got
    rc, got, out = run(home, path, as_root, command=["/bin/sh", "-c", REPORT])  # command alone: no Cmd after it
    assert rc == 0, out
    assert got["ARGV"] == "/bin/sh", got


def test_an_image_is_unpacked_once_and_found_by_its_manifest_digest(tmp_path: Path) -> None:
    """The second load of the same image (as a layout, then as the archive of it) unpacks nothing."""
    layout = tmp_path / "layout"
    images.layout(layout, app_image())
    cache = tmp_path / "cache"
    first = oci_image.load(NAME, layout, cache)
    again = oci_image.load(NAME, layout, cache)
    assert (first.cached, again.cached, again.rootfs) == (False, True, first.rootfs)
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    assert (first.rootfs / "bin" / "busybox").is_file()
    other = tmp_path / "other"  # a different image: its own entry
    images.layout(other, images.Spec([images.busybox_layer()], cmd=["true"]))
    assert oci_image.load(NAME, other, cache).rootfs != first.rootfs


def test_the_image_config_is_applied_as_containerd_does() -> None:
    """containerd's WithProcessArgs: command replaces Entrypoint and drops Cmd; args replace Cmd; an Entrypoint of
    one empty string is none. Env: default PATH, the image's, the container's over both."""
    config = oci_image.Config(entrypoint=("/e",), cmd=("c1", "c2"), env=(("A", "image"), ("B", "image")))
    assert image_config.process(config, (), ()) == (("/e",), ("c1", "c2"))
    assert image_config.process(config, (), ("a",)) == (("/e",), ("a",))
    assert image_config.process(config, ("/x",), ()) == (("/x",), ())
    assert image_config.process(oci_image.Config(entrypoint=("",), cmd=("c",)), (), ()) == ((), ("c",))
    env = image_config.env(config, {"B": "pod"})
    assert env == {"PATH": image_config.DEFAULT_PATH.split("=", 1)[1], "A": "image", "B": "pod"}


def test_a_missing_image_file_or_folder_is_one_problem(home: Path) -> None:
    """A path that is neither a folder, a layout nor an archive: exit 2, the --image value named."""
    junk = home / "junk.bin"
    junk.write_bytes(b"not a tar")
    r = subprocess.run(
        _argv(home, "--image", f"{NAME}={junk}", command=["true"]),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{NAME}={junk}" in r.stdout + r.stderr


def _argv(home: Path, *args: str, **fields: Any) -> list[str]:
    """`jaxinfra simulate ARGS` of one container (`container(**fields)`) written to `home`/job.yaml."""
    manifest = home / "job.yaml"
    manifest.write_text(json.dumps(container(**fields)))
    return sim_argv(manifest, home / "report.json", *args)


def _run_image(home: Path, path: Path, **run: Any) -> subprocess.CompletedProcess[str]:
    """That simulation of the image at `path`, through `unprivileged.run` (`run`: as_root, subordinate), its output
    as it is (no report needed)."""
    argv = _argv(home, "--image", f"{NAME}={path}", *run.pop("args", ()))
    env = unprivileged.cache_env(home, run.get("as_root", False))
    return unprivileged.run(
        argv, home, env=env, cwd=unprivileged.ROOT, capture_output=True, text=True, timeout=60, **run
    )


def test_without_the_images_command_nothing_runs_and_the_plain_folder_keeps_todays_behaviour(home: Path) -> None:
    """No command and no image given whole: the problem says how to give one; a plain folder still leaves the
    machine's system under it."""
    r = subprocess.run(_argv(home), capture_output=True, text=True, timeout=60, check=False, env=_env(home))
    assert r.returncode == 1 and "--image IMAGE=PATH" in r.stdout + r.stderr, r.stdout + r.stderr
    folder = home / "top"
    folder.mkdir()
    (folder / "marker").write_text("x")
    script = "test -e /marker && test -e /usr/bin/env && echo BOTH=yes >&2"
    job = container(command=["sh", "-c", script])
    rc, report, out = simulate(home, [job], "--image", f"{NAME}={folder}")
    assert rc == 0 and seen(pods(report)["img-0"])["BOTH"] == "yes", out


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}


@pytest.fixture
def canary() -> Iterator[Path]:
    """A folder of this machine's that a hostile layer aims at: it must stay as it is."""
    folder = Path(f"/tmp/jaxinfra-canary-{secrets.token_hex(4)}")
    folder.mkdir()
    (folder / "keep").write_text("unchanged")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def hostile(canary: Path) -> dict[str, list[list[images.Entry]]]:
    """Layers an attacker's image could carry, each after a busybox layer: what a naive unpacker would write onto the
    machine (through a symlink to the canary folder, absolute or climbing, also one left by a lower layer; a hard link
    out of the root) or a device node it would give the container."""
    up = "../" * 12 + str(canary).lstrip("/")
    return {
        "absolute-symlink": [
            [images.Entry("evil", "symlink", target=str(canary)), images.Entry("evil/pwned", data=b"x")]
        ],
        "climbing-symlink": [[images.Entry("evil", "symlink", target=up), images.Entry("evil/pwned", data=b"x")]],
        "symlink-of-a-lower-layer": [
            [images.Entry("evil", "symlink", target=str(canary))],
            [images.Entry("evil/pwned", data=b"x")],
        ],
        "hard-link-out": [[images.Entry("pwned", "hardlink", target=f"../../..{canary}/keep")]],
        "device-node": [[images.Entry("dev", "dir", mode=0o755), images.Entry("dev/mem", "chr", mode=0o666)]],
        "symlinked-dev": [[images.Entry("dev", "symlink", target=str(canary))]],
    }


WHY = {
    "absolute-symlink": None,  # written inside the root, where the link leads there (containerd's archive.Apply)
    "climbing-symlink": None,
    "symlink-of-a-lower-layer": None,
    "hard-link-out": "umoci could not unpack it",  # its target, resolved inside the root, is not there
    "device-node": None,  # an empty file in a user namespace (umoci's rootless unpack); /dev is the runtime's
    "symlinked-dev": "entry 'dev' is not a folder, where the runtime mounts the container's own /dev",
}


@pytest.mark.parametrize("attack", sorted(WHY))
@pytest.mark.parametrize("kind", ["layout", "archive"])
@MODES
def test_a_hostile_layer_never_reaches_the_machine(
    home: Path, canary: Path, as_root: bool, attack: str, kind: str
) -> None:
    """Unpacked confined, as a layout or through skopeo from a `docker save` archive: the canary folder the layer
    aims at is as it was whatever the verdict; an entry aimed out of the root lands inside it (the job runs, as a
    cluster runs it); what the runtime cannot build on (a link at /dev) or umoci cannot unpack is one line, exit 2,
    nothing unpacked."""
    layers = [images.busybox_layer(), *hostile(canary)[attack]]
    path = _given(home, kind, images.Spec(layers, cmd=["/bin/busybox", "true"]))
    r = _run_image(home, path, as_root=as_root)
    out = (r.stdout + r.stderr).strip()
    assert "Traceback" not in out, out
    assert sorted(p.name for p in canary.iterdir()) == ["keep"] and (canary / "keep").read_text() == "unchanged"
    why = WHY[attack]
    if why is None:
        assert r.returncode == 0, out
        return
    assert r.returncode == 2 and len(out.splitlines()) == 1, out
    assert f"image {NAME} ({path})" in out and why in out, out
    assert not list(_cache(home, as_root).glob("unpacked/*/rootfs")), "nothing unpacked"


def test_a_symlink_inside_the_root_may_be_written_through(tmp_path: Path) -> None:
    """A layer writing through a symlink that stays in the root (`lib -> usr/lib`, as merged-/usr images have) is
    unpacked as containerd unpacks it: the file lands where the link leads."""
    layers = [
        images.busybox_layer(
            extra=[images.Entry("usr", "dir", mode=0o755), images.Entry("usr/lib", "dir", mode=0o755)]
        ),
        [images.Entry("lib", "symlink", target="usr/lib"), images.Entry("lib/libx.so", data=b"lib")],
    ]
    layout = tmp_path / "layout"
    images.layout(layout, images.Spec(layers, cmd=["true"]))
    image = oci_image.load(NAME, layout, tmp_path / "cache")
    assert (image.rootfs / "usr" / "lib" / "libx.so").read_bytes() == b"lib"


def _merged(tmp: Path, tags: dict[str, str]) -> Path:
    """One layout holding an image per tag (`org.opencontainers.image.ref.name`), each running `echo TAG`."""
    merged = tmp / "merged"
    manifests = []
    for tag, ref in tags.items():
        one = tmp / f"one-{tag}"
        spec = images.Spec([images.busybox_layer()], cmd=["echo", tag], annotations={NAME_REF: ref})
        images.layout(one, spec)
        shutil.copytree(one / "blobs", merged / "blobs", dirs_exist_ok=True)
        manifests += json.loads((one / "index.json").read_text())["manifests"]
    (merged / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (merged / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": manifests}))
    return merged


NAME_REF = "org.opencontainers.image.ref.name"


def test_a_layout_of_several_images_gives_the_one_the_manifest_names(tmp_path: Path) -> None:
    """By its ref.name annotation (the tag, as skopeo's `oci:DIR:TAG` writes it); none or several: one line."""
    layout = _merged(tmp_path, {"v1": "v1", "v2": "v2"})
    assert oci_image.load("registry.example/app:v2", layout, tmp_path / "c").config.cmd == ("echo", "v2")
    with pytest.raises(oci_image.ImageError, match="holds 2 images and 0 of them are named registry.example/app:v3"):
        oci_image.load("registry.example/app:v3", layout, tmp_path / "c")


def test_an_oci_archive_of_several_images_gives_the_one_the_manifest_names(tmp_path: Path) -> None:
    """The same layout as one tar (`docker buildx build --output type=oci`): skopeo's oci-archive transport takes the
    image whose ref.name is the tag; none named so: one line, nothing converted."""
    archive = tmp_path / "both.tar"
    images.oci_archive(_merged(tmp_path, {"v1": "v1", "v2": "v2"}), archive)
    assert oci_image.load("registry.example/app:v2", archive, tmp_path / "c").config.cmd == ("echo", "v2")
    with pytest.raises(oci_image.ImageError, match="OCI archive holds 2 images and 0 of them are named .*:v3"):
        oci_image.load("registry.example/app:v3", archive, tmp_path / "c")


def test_a_tampered_blob_or_a_digest_naming_a_path_is_refused(tmp_path: Path) -> None:
    """A layer whose bytes are not its digest's, and an index whose digest would name a path outside `blobs/sha256`:
    refused before anything is unpacked."""
    layout = tmp_path / "layout"
    images.layout(layout, images.Spec([images.busybox_layer()], cmd=["true"]))
    manifest = json.loads((layout / "index.json").read_text())["manifests"][0]
    blobs = layout / "blobs" / "sha256"
    layer = json.loads((blobs / manifest["digest"][7:]).read_text())["layers"][0]["digest"]
    with open(blobs / layer[7:], "ab") as f:
        f.write(b"\0" * 16)
    with pytest.raises(oci_image.ImageError, match="umoci could not unpack it: .*verified reader"):
        oci_image.load(NAME, layout, tmp_path / "c")
    assert not (tmp_path / "c" / "unpacked").exists() or not list((tmp_path / "c" / "unpacked").iterdir())
    manifest["digest"] = "sha256:../../../../etc/passwd"
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [manifest]}))
    with pytest.raises(oci_image.ImageError, match="is not a sha256 digest"):
        oci_image.load(NAME, layout, tmp_path / "c")


def test_without_umoci_the_fix_names_the_debian_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 3 (the machine's limit), naming the package to install: the parts check before any image is unpacked
    (`load_images`); the unpacker itself, called without that check, still says what is missing (exit 3)."""
    from jaxinfra.simulate_flags import load_images
    from jaxinfra_sim.core import programs
    from jaxinfra_sim.core.errors import Unavailable

    layout = tmp_path / "layout"
    images.layout(layout, images.Spec([images.busybox_layer()], cmd=["true"]))
    found = programs.find
    monkeypatch.setattr(parts, "find", lambda name: None if name == "umoci" else found(name))  # (parts look up there)
    with pytest.raises(Unavailable, match=r"`umoci` \(--image unpacks OCI image layouts with it\)") as raised:
        load_images({NAME: layout}, run_command=False, egress=False)
    assert raised.value.status == 3 and "apt-get install -y umoci" in str(raised.value)
    monkeypatch.setattr(programs, "find", lambda name: None)
    with pytest.raises(Unavailable, match="`umoci` is not installed") as raised:
        oci_image.load(NAME, layout, tmp_path / "c")
    assert raised.value.status == 3


def test_unprivileged_without_subordinate_ids_an_images_user_is_exit_3(home: Path) -> None:
    """The image's User (uid 1000) needs a subordinate id, as a runAsUser would: exit 3 with the fix, nothing run."""
    path = _given(home, "layout", app_image())
    r = _run_image(home, path, subordinate=False)
    out = r.stdout + r.stderr
    assert r.returncode == 3 and "runs as ids [1000]" in out, out


@pytest.mark.parametrize(
    ("user", "refused"),
    [
        ("app", "image has non-numeric user (app), cannot verify user is non-root"),
        ("", "image will run as root"),
        ("1000:1000", None),
    ],
    ids=["name", "none", "numeric"],
)
def test_run_as_non_root_checks_the_images_user_as_the_kubelet_does(home: Path, user: str, refused: str | None) -> None:
    """runAsNonRoot without runAsUser: a User by name or none (root) is the kubelet's CreateContainerConfigError, the
    pod never started; a numeric non-root User runs."""
    path = _given(home, "layout", dataclasses.replace(app_image(), user=user))
    rc, report, out = simulate(
        home, [container(securityContext={"runAsNonRoot": True})], "--image", f"{NAME}={path}", as_root=True
    )
    if refused is None:
        assert rc == 0 and seen(pods(report)["img-0"])["UID"] == "1000:1000", out
    else:
        assert rc != 0 and f"CreateContainerConfigError: container has runAsNonRoot and {refused}" in out, out
        assert not pods(report), "no pod started"


@MODES
def test_a_containers_writes_land_in_its_own_layer_never_in_the_image(home: Path, as_root: bool) -> None:
    """A container that writes a file, removes a program and changes /etc/passwd leaves the unpacked image as it was
    (the next container sees none of it); under readOnlyRootFilesystem the same writes fail."""
    path = _given(home, "layout", app_image())
    script = (
        "echo hi > /srv/new && rm /bin/ls && echo x >> /etc/passwd && echo WROTE=yes >&2 || echo WROTE=no >&2; "
        "test -e /srv/new && echo NEW=seen >&2 || echo NEW=absent >&2"
    )
    rc, got, out = run(home, path, as_root, command=["/bin/sh", "-c", script], securityContext={"runAsUser": 0})
    assert rc == 0 and (got["WROTE"], got["NEW"]) == ("yes", "seen"), out
    [rootfs] = _cache(home, as_root).glob("unpacked/*/rootfs")
    assert not (rootfs / "srv" / "new").exists() and (rootfs / "bin" / "ls").is_symlink()
    assert (rootfs / "etc" / "passwd").read_text() == PASSWD
    rc, got, out = run(
        home,
        path,
        as_root,
        command=["/bin/sh", "-c", script],
        securityContext={"runAsUser": 0, "readOnlyRootFilesystem": True},
    )
    assert rc == 0 and (got["WROTE"], got["NEW"]) == ("no", "absent"), out


def test_the_report_names_each_image_whose_containers_ran_this_machines_programs(home: Path) -> None:
    """Under --run-command, a container whose image is not given whole runs this machine's programs, where a cluster
    runs the image's (an image without `sh` fails there, StartError): the report says so once per image, and its JSON
    lists them; the image given whole is not among them. (Two containers of the unchecked image: one note.)"""
    job = container(command=["sh", "-c", "true"])
    spec = job["spec"]["template"]["spec"]
    spec["containers"] += [
        {"name": f"side{n}", "image": "busybox:1.36", "command": ["sh", "-c", "true"]} for n in (1, 2)
    ]
    env = unprivileged.cache_env(home, True)
    given = _given(home, "layout", app_image())
    rc, report, out = simulate(home, [job], "--image", f"{NAME}={given}", env=env)
    assert rc == 0, out
    assert report["unchecked_images"] == ["busybox:1.36"], report["unchecked_images"]
    said = [n for n in report["notes"] if n.startswith("image ")]
    assert said == [
        "image busybox:1.36 not checked: its containers ran this machine's programs (/usr, its Python), not the "
        "image's own (on a cluster a program the image lacks fails its container, StartError); give it whole to run "
        "it: --image busybox:1.36=LAYOUT or =ARCHIVE"
    ], said
    assert said[0] in out
