"""Nothing a manifest says is a host path: the simulator runs hostile YAML.

Manifests in the style of the Kubernetes docs' volume examples (a ConfigMap volume with items, a
downwardAPI volume, an emptyDir with a subPath), made hostile: item paths and keys that climb out of
the volume, workload names and namespaces that are absolute paths, volume, claim and bucket names that
are paths, subPaths that leave the volume. Each one is refused with the API server's own rule (the
field named) or runs in the simulator's own, safely named folders; either way no file outside the run
changes and no folder appears where the manifest pointed. As root and as uid 65534 (tests/support/unprivileged.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jaxinfra import yamlio
from jaxinfra.errors import JaxinfraError
from jaxinfra_sim.cluster.control_plane import emulate
from jaxinfra_sim.core import model, paths
from jaxinfra_sim.kubelet import volume_manager
from tests.support import unprivileged
from tests.support.cli import simulate_as
from tests.support.one_pod import one_pod_job
from tests.support.problems import problems_of
from tests.support.trees import tree_snapshot

pytestmark = pytest.mark.simulator

CANARIES = {"file": "canary\n", "labels": "canary labels\n", ".bashrc": "# the user's own\n"}
CLIMB = "../" * 40  # more '..' than any folder of the run is deep: from anywhere, the machine's root
#: Where a hostile name points, outside the test's folder: short, so that names made of it are not cut (the Job
#: controller
#: cuts pod names to 63 characters) and pod hostnames fit in 64.
ELSEWHERE = Path(f"/tmp/jaxinfra-paths-{secrets.token_hex(4)}")


def job(
    name: str = "paths",
    namespace: str = "default",
    *,
    volumes: str = "[]",
    mounts: str = "[]",
    command: str = "true",
    extra: str = "",
) -> str:
    """A one-pod Indexed Job whose container runs `command` (with --run-command), with these volumes and mounts."""
    return one_pod_job(
        command,
        volumes,
        mounts,
        name=name,
        namespace=namespace,
        template_metadata='{labels: {team: ml}, annotations: {gke-gcsfuse/volumes: "true"}}',
        extra=extra,
    )


def config_map(data: dict[str, str], name: str = "cfg") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {json.dumps(data)}\n---\n"


def canaries(folder: Path, owner: int | None = None) -> Path:
    """The files a hostile manifest aims at, in `folder`/canary (owned by `owner`: the attack could write them)."""
    canary = folder / "canary"
    canary.mkdir()
    for name, text in CANARIES.items():
        (canary / name).write_text(text)
    if owner is not None:
        for path in (canary, *canary.iterdir()):
            os.chown(path, owner, owner)
    return canary


def refused(field: str, why: str, who: str = "the API server rejects") -> dict[str, str]:
    """Refused with the workload's pods (the simulator's own check of the API server's or the kubelet's rule)."""
    return {"field": field, "why": why, "who": who}


def front_door(field: str, why: str) -> dict[str, str]:
    """Refused when applied (`jaxinfra.admission`): no object stored, no workload, nothing started (exit 2)."""
    return {"field": field, "why": why, "who": "front door"}


# Each case: (manifest from the canary folder and the test's folder, extra CLI args, what refuses it (None: it runs),
# absolute paths the manifest names that must not appear).
CASES: dict[str, Any] = {
    "configMap-item-absolute": lambda c, t: (
        config_map({"settings": "pwned"})
        + job(
            volumes=f'[{{name: cfg, configMap: {{name: cfg, items: [{{key: settings, path: "{c}/file"}}]}}}}]',
            mounts="[{name: cfg, mountPath: /etc/app}]",
        ),
        (),
        front_door("spec.template.spec.volumes[0].configMap.items[0].path", "must be a relative path"),
        [],
    ),
    "configMap-item-dotdot": lambda c, t: (
        config_map({"settings": "pwned"})
        + job(
            volumes=f"[{{name: cfg, configMap: {{name: cfg, items: [{{key: settings, path: "
            f'"{CLIMB}{str(c)[1:]}/file"}}]}}}}]',
            mounts="[{name: cfg, mountPath: /etc/app}]",
        ),
        ("--run-command",),
        front_door("spec.template.spec.volumes[0].configMap.items[0].path", "must not contain '..'"),
        [],
    ),
    "configMap-item-dotdot-prefix": lambda c, t: (
        config_map({"settings": "pwned"})
        + job(
            volumes='[{name: cfg, configMap: {name: cfg, items: [{key: settings, path: "..data"}]}}]',
            mounts="[{name: cfg, mountPath: /etc/app}]",
        ),
        ("--run-command",),
        front_door("spec.template.spec.volumes[0].configMap.items[0].path", "must not start with '..'"),
        [],
    ),
    "configMap-key-dotdot": lambda c, t: (
        config_map({"../x": "pwned", f"{CLIMB}{str(c)[1:]}/.bashrc": "pwned"})
        + job(volumes="[{name: cfg, configMap: {name: cfg}}]", mounts="[{name: cfg, mountPath: /etc/app}]"),
        ("--run-command",),
        front_door('ConfigMap/cfg data["../x"]', "must not start with '..'"),
        [],
    ),
    "secret-item-absolute": lambda c, t: (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {token: pwned}\n---\n"
        + job(
            volumes=f'[{{name: s, secret: {{secretName: s, items: [{{key: token, path: "{c}/file"}}]}}}}]',
            mounts="[{name: s, mountPath: /etc/s}]",
        ),
        ("--run-command",),
        front_door("spec.template.spec.volumes[0].secret.items[0].path", "must be a relative path"),
        [],
    ),
    "downwardAPI-item-absolute": lambda c, t: (
        job(
            volumes=f'[{{name: info, downwardAPI: {{items: [{{path: "{c}/labels", fieldRef: {{fieldPath: '
            f"metadata.labels}}}}]}}}}]",
            mounts="[{name: info, mountPath: /etc/podinfo}]",
        ),
        ("--run-command",),
        front_door("spec.template.spec.volumes[0].downwardAPI.path", "must be a relative path"),
        [],
    ),
    "projected-item-dotdot": lambda c, t: (
        config_map({"settings": "pwned"})
        + job(
            volumes=f"[{{name: all, projected: {{sources: [{{configMap: {{name: cfg, items: [{{key: settings, path: "
            f'"a/{CLIMB}{str(c)[1:]}/file"}}]}}}}]}}}}]',
            mounts="[{name: all, mountPath: /etc/all}]",
        ),
        ("--run-command",),
        front_door(
            "spec.template.spec.volumes[0].projected.sources[0].configMap.items[0].path", "must not contain '..'"
        ),
        [],
    ),
    "job-name-absolute": lambda c, t: (
        job(name=f"{ELSEWHERE}/x"),
        ("--run-command",),
        front_door("metadata.name", "a lowercase RFC 1123 subdomain"),
        [ELSEWHERE],
    ),
    "job-name-climbing": lambda c, t: (
        job(name=f"{'../' * 10}{str(ELSEWHERE)[1:]}/x"),
        ("--run-command",),
        front_door("metadata.name", "a lowercase RFC 1123 subdomain"),
        [ELSEWHERE],
    ),
    "namespace-slash": lambda c, t: (
        job(namespace=f"{t}/nsdir"),
        ("--run-command",),
        front_door("metadata.namespace", "a lowercase RFC 1123 label"),
        [t / "nsdir"],
    ),
    "namespace-tmp": lambda c, t: (
        job(namespace=str(ELSEWHERE)),
        ("--run-command",),
        front_door("metadata.namespace", "a lowercase RFC 1123 label"),
        [ELSEWHERE],
    ),
    "name-300-chars": lambda c, t: (
        job(name="a" * 300),
        ("--run-command",),
        front_door("metadata.name", "must be no more than 253"),
        [],
    ),
    "name-unicode": lambda c, t: (
        job(name="jöb-ü/../../é"),
        ("--run-command",),
        front_door("metadata.name", "a lowercase RFC 1123 subdomain"),
        [],
    ),
    "emptyDir-named-slash": lambda c, t: (
        job(volumes='[{name: "/", emptyDir: {}}]', mounts='[{name: "/", mountPath: /scratch}]'),
        ("--run-command",),
        front_door("spec.template.spec.volumes[0].name", "a lowercase RFC 1123 label"),
        [],
    ),
    "emptyDir-named-path": lambda c, t: (
        job(volumes=f'[{{name: "{c}", emptyDir: {{}}}}]', mounts=f'[{{name: "{c}", mountPath: /scratch}}]'),
        ("--run-command",),
        front_door("spec.template.spec.volumes[0].name", "a lowercase RFC 1123 label"),
        [],
    ),
    "claimName-dotdot": lambda c, t: (
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: ../../x}\n"
        "spec: {accessModes: [ReadWriteMany], resources: {requests: {storage: 1Gi}}}\n---\n"
        + job(
            volumes="[{name: ckpt, persistentVolumeClaim: {claimName: ../../x}}]",
            mounts="[{name: ckpt, mountPath: /ckpt}]",
            command="echo ok > /ckpt/written",
        ),
        ("--run-command",),
        front_door("PersistentVolumeClaim/../../x metadata.name", "a lowercase RFC 1123 subdomain"),
        [],
    ),
    "bucketName-dotdot": lambda c, t: (
        job(
            volumes=f"[{{name: gcs, csi: {{driver: gcsfuse.csi.storage.gke.io, volumeAttributes: {{bucketName: "
            f'"{CLIMB}{str(c)[1:]}"}}}}}}]',
            mounts="[{name: gcs, mountPath: /gcs}]",
            command="echo pwned > /gcs/file",
        ),
        ("--run-command",),
        None,
        [],
    ),
    "subPath-slash": lambda c, t: (
        job(volumes="[{name: scratch, emptyDir: {}}]", mounts='[{name: scratch, mountPath: /scratch, subPath: "/"}]'),
        ("--run-command",),
        front_door("spec.template.spec.containers[0].volumeMounts.subPath", "must be a relative path"),
        [],
    ),
    "subPath-dotdot": lambda c, t: (
        job(
            volumes="[{name: scratch, emptyDir: {}}]", mounts='[{name: scratch, mountPath: /scratch, subPath: "../.."}]'
        ),
        ("--run-command",),
        front_door("spec.template.spec.containers[0].volumeMounts.subPath", "must not contain '..'"),
        [],
    ),
    "subPath-name-too-long": lambda c, t: (
        job(
            volumes="[{name: scratch, emptyDir: {}}]",
            mounts=f'[{{name: scratch, mountPath: /scratch, subPath: "a/{"x" * 300}"}}]',
        ),
        ("--run-command",),
        refused("spec.containers[0].volumeMounts[0].subPath", "longer than 255 bytes", "the kubelet cannot"),
        [],
    ),
    "mountPath-empty": lambda c, t: (
        job(volumes="[{name: scratch, emptyDir: {}}]", mounts='[{name: scratch, mountPath: ""}]'),
        ("--run-command",),
        front_door("spec.template.spec.containers[0].volumeMounts[0].mountPath", "Required value"),
        [],
    ),
}


#: Names that make a pod hostname longer than sethostname(2) takes (64 bytes): the pod fails, its verdict says why.
MAY_FAIL: set[str] = set()


def check(case: str, home: Path, canary: Path, as_root: bool = True) -> None:
    text, args, refusal, absent = CASES[case](canary, home)
    before = tree_snapshot(home)
    rc, out, report = simulate_as(home, text, *args, as_root=as_root)
    assert tree_snapshot(home) == before, "files changed or appeared outside the run"
    assert {p.read_text() for p in canary.iterdir()} == set(CANARIES.values())
    for path in absent:
        assert not path.exists(), path
    if refusal is None:  # it runs, in the simulator's folders
        assert rc == 0 or (case in MAY_FAIL and rc == 1), out
        return
    if refusal["who"] == "front door":  # refused when applied: nothing stored, nothing started
        assert rc == 2 and all(w["attempts"] == [] for w in report["workloads"]), out
        assert any(refusal["field"] in p["path"] and refusal["why"] in p["message"] for p in report["problems"]), out
        return
    # the API server's refusal stops the run before anything starts (exit 2); a kubelet's leaves the pod Pending (1)
    expected = 2 if "API server" in refusal["who"] else 1
    assert rc == expected and refusal["field"] in out and refusal["why"] in out, out
    [workload] = report["workloads"]
    assert workload["reason"].endswith("; not started") and workload["attempts"] == []
    [problem] = [p for p in workload["problems"] if refusal["field"] in p["path"]]
    assert refusal["why"] in problem["message"]
    assert refusal["who"] in problem["message"] and problem["fix"]


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_manifest_touches_nothing_outside_the_run(case: str, tmp_path: Path) -> None:
    check(case, tmp_path, canaries(tmp_path))


@pytest.mark.parametrize(
    "case", ["configMap-item-absolute", "configMap-item-dotdot", "job-name-absolute", "subPath-dotdot"]
)
def test_as_an_unprivileged_user_too(case: str) -> None:
    home = unprivileged.scratch_home()
    try:
        check(case, home, canaries(home, unprivileged.NOBODY if os.getuid() == 0 else None), as_root=False)
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)


def test_the_runs_that_run_succeed(tmp_path: Path) -> None:
    """What the front door admits runs in the simulator's own folders: a Job, and a claim with a dotted name, in a
    namespace, writing to the claim through a two-level subPath. (Names like paths never get this far: the API
    server's name rules refuse them; `paths.safe_name` still names every folder, tested below.)"""
    text = job(
        name="paths-v1",
        namespace="ml",
        command="echo ok > /ckpt/written && cat /ckpt/written",
        volumes="[{name: ckpt, persistentVolumeClaim: {claimName: ckpt.v1}}]",
        mounts="[{name: ckpt, mountPath: /ckpt, subPath: run/1}]",
        extra=(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: ckpt.v1, namespace: ml}\n"
            "spec: {accessModes: [ReadWriteMany], resources: {requests: {storage: 1Gi}}}\n---\n"
        ),
    )
    before = tree_snapshot(tmp_path)
    rc, out, report = simulate_as(tmp_path, text, "--run-command")
    assert rc == 0 and report["ok"], out
    assert tree_snapshot(tmp_path) == before


def test_a_symlink_a_container_planted_for_its_restart_is_refused(tmp_path: Path) -> None:
    """The container turns its subPath into a symlink to / and fails; restarted in place, its subPath would be the
    machine's root, read-write. The simulator stops there (exit 2, one line), the container never restarts."""
    canary = canaries(tmp_path)
    script = (
        f"if [ -L /scratch/link ]; then echo pwned > /sub{canary}/file; exit 0; fi; "
        "rm -rf /scratch/link && ln -s / /scratch/link && exit 1"
    )
    text = job(
        command=script,
        volumes="[{name: scratch, emptyDir: {}}]",
        mounts="[{name: scratch, mountPath: /scratch}, {name: scratch, mountPath: /sub, subPath: link}]",
    )
    text = text.replace("backoffLimit: 0", "backoffLimit: 2").replace(
        "restartPolicy: Never", "restartPolicy: OnFailure"
    )
    before = tree_snapshot(tmp_path)
    rc, out, _ = simulate_as(tmp_path, text, "--run-command")
    assert rc == 2, out
    assert (
        "error: Job/default/paths pod paths-0 volume scratch subPath = 'link': leads out of its volume through a "
        "symlink" in out
    )
    assert tree_snapshot(tmp_path) == before


# --- behind the API server's rules: the simulator's own guard ----------------------------------------------


def _pod(mounts: tuple[model.Mount, ...]) -> model.Pod:
    [workload] = emulate(yamlio.load(job())).workloads
    return dataclasses.replace(workload.pods[0], mounts=mounts)


@pytest.mark.parametrize("relative", ["/etc/passwd", "../x", "a/../../x", "", "a\0b", "x" * 300])
def test_a_file_volume_never_writes_outside_its_folder(tmp_path: Path, relative: str) -> None:
    """Were a path ever to get past volumes.py, the container's preparation refuses it before writing anything."""
    pod = _pod((model.Mount("cfg", "/etc/app", kind="files", read_only=True, files=((relative, "pwned"),)),))
    with pytest.raises(paths.UnsafePath) as err:
        volume_manager.sources(pod, tmp_path / "pod", tmp_path / "pod" / "sandbox", lambda m: tmp_path / "storage")
    assert (
        "volume cfg file" in str(err.value)
        and isinstance(err.value, ValueError)
        and isinstance(err.value, JaxinfraError)
    )
    after = tree_snapshot(tmp_path)  # the volume's own (empty) folder, nothing else
    assert after and all(k.startswith(str(tmp_path / "pod")) and v == ("dir",) for k, v in after.items()), after


def test_a_symlink_a_container_left_in_its_volume_does_not_lead_out(tmp_path: Path) -> None:
    """A container writes its emptyDir (and claims): a symlink it planted there is not a way out for a subPath."""
    outside = tmp_path / "outside"
    outside.mkdir()
    pod = _pod((model.Mount("scratch", "/scratch", sub_path="link/sub", kind="emptyDir"),))
    scratch = tmp_path / "pod" / "volumes" / paths.safe_name("scratch")
    scratch.mkdir(parents=True)
    (scratch / "link").symlink_to(outside)
    with pytest.raises(paths.UnsafePath, match="symlink"):
        volume_manager.sources(pod, tmp_path / "pod", tmp_path / "pod" / "sandbox", lambda m: tmp_path / "storage")
    assert list(outside.iterdir()) == []


def test_folders_are_named_by_the_simulator(tmp_path: Path) -> None:
    pod = _pod(
        (
            model.Mount("/", "/a", kind="emptyDir"),
            model.Mount("c", "/b", kind="files", files=(("x/y", "1"),)),
            model.Mount("d", "/c", sub_path="s/t", kind="claim", key="../../k"),
        )
    )
    got = volume_manager.sources(
        pod, tmp_path / "pod", tmp_path / "pod" / "sandbox", lambda m: tmp_path / "claims" / paths.safe_name(m.key)
    )
    for source, _, _ in got:
        assert source.path.resolve().is_relative_to(tmp_path.resolve())
    assert (got[1][0].path / "x" / "y").read_text() == "1"
    assert sorted(p.name for p in (tmp_path / "claims").iterdir()) == [paths.safe_name("../../k")]


# --- the API server's rules, as volumes.py applies them -------------------------------------------------------


def test_each_rejection_names_the_field_the_value_and_the_fix() -> None:
    objs = yamlio.load(
        config_map({"settings": "x"})
        + job(
            volumes="[{name: cfg, configMap: {name: cfg, items: [{key: settings, path: ok}, {key: settings, path: "
            "/abs}]}}, "
            '{name: info, downwardAPI: {items: [{path: "../up", fieldRef: {fieldPath: metadata.name}}]}}, {name: '
            "e, emptyDir: {}}]",
            mounts='[{name: cfg, mountPath: /etc/app}, {name: e, mountPath: /e, subPath: "a/../b"}]',
        )
    )
    # the kubelet's reading; the pods' own front door refuses them too (`pods`), as the Job's refuses the Job first
    found = {p.path.split(" ", 3)[-1]: p for p in problems_of(emulate(objs)) if not p.path.endswith(" pods")}
    assert set(found) == {
        "spec.volumes[0].configMap.items[1].path",
        "spec.volumes[1].downwardAPI.items[0].path",
        "spec.containers[0].volumeMounts[1].subPath",
    }, found
    p = found["spec.volumes[0].configMap.items[1].path"]
    assert (p.value, p.message) == (
        "/abs",
        "must be a relative path: the API server rejects the pod",
    ) and "relative" in p.fix
    assert found["spec.volumes[1].downwardAPI.items[0].path"].value == "../up"
    assert found["spec.containers[0].volumeMounts[1].subPath"].message.startswith("must not contain '..'")


def test_valid_volumes_are_untouched() -> None:
    """What the docs' examples do (nested item paths, a dotted key, a subPath folder) stays valid."""
    objs = yamlio.load(
        config_map({"game.properties": "a=1", "ui_key-1": "b"})
        + job(
            volumes="[{name: cfg, configMap: {name: cfg, items: [{key: game.properties, path: "
            "conf/game.properties}]}}, "
            "{name: all, configMap: {name: cfg}}, {name: e, emptyDir: {}}]",
            mounts="[{name: cfg, mountPath: /etc/app}, {name: all, mountPath: /etc/all}, {name: e, mountPath: /e, "
            "subPath: data/x}]",
        )
    )
    cluster = emulate(objs)
    assert problems_of(cluster) == []
    mounts = {m.volume: m for m in cluster.workloads[0].pods[0].mounts}
    assert dict(mounts["cfg"].files) == {"conf/game.properties": "a=1"} and mounts["e"].sub_path == "data/x"


def test_files_the_kubelet_cannot_write_leave_the_pod_pending() -> None:
    objs = yamlio.load(
        config_map({"a": "1", "b": "2", "c": "3"})
        + job(
            volumes="[{name: cfg, configMap: {name: cfg, items: [{key: a, path: x}, {key: b, path: x-y}, {key: c, "
            "path: ./x/y}]}}]",
            mounts="[{name: cfg, mountPath: /etc/app}]",
        )
    )
    [problem] = problems_of(emulate(objs))
    assert (
        "the kubelet cannot set it up" in problem.message
        and "the file 'x' is also a folder of 'x/y'" in problem.message
    )
    assert "its own file path" in problem.fix


# --- paths.safe_name and paths.inside, for any string -------------------------------------------------------------


@given(st.text())
def test_safe_name_is_a_plain_file_name(text: str) -> None:
    name = paths.safe_name(text)
    assert 0 < len(name) <= 64 and name not in (".", "..") and not name.startswith((".", "-"))
    assert set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789._-")
    assert name == paths.safe_name(text)


@given(st.text(), st.text())
def test_safe_names_of_different_strings_differ(a: str, b: str) -> None:
    assert (paths.safe_name(a) == paths.safe_name(b)) == (a == b)


PATHISH = (
    st.lists(st.sampled_from(["..", ".", "", "a", "b", "/", "\0", "é", "x" * 256, "link"]), max_size=6).map("/".join)
    | st.text()
)


@given(PATHISH)
def test_inside_returns_a_path_within_root_or_refuses(relative: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        (root / "a").mkdir(parents=True)
        (root / "link").symlink_to(tmp)  # a way out, planted
        try:
            got = paths.inside(root, relative)
        except paths.UnsafePath as err:
            assert isinstance(err, ValueError) and err.problems[0].value == relative
            return
        real = os.path.realpath(root)
        assert os.path.commonpath([real, os.path.realpath(got)]) == real
        assert relative and not relative.startswith("/") and ".." not in relative.split("/") and "\0" not in relative
