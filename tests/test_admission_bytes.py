"""[]byte fields (a ConfigMap's binaryData, a Secret's data) as the API server decodes them: standard base64, or the
whole object refused at decoding with Go's "illegal base64 data at input byte N" (400 BadRequest, `Secret in version
"v1" cannot be handled as a Secret: ...`), every such value named at once, exit 2, never a traceback.

The offsets expected are those real API servers printed for the same values, as reported upstream: kubernetes/
kubernetes#7817 and #31548 (`admin`, `billy`: byte 4; `bill` decodes), rancher/dashboard#645 (binaryData `dfs`: byte
0), argoproj-labs/argocd-vault-plugin#381 (`<foo>`: byte 0), zachomedia/cert-manager-webhook-pdns#53
(`APIKEY_BASE64`: byte 6)."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from jaxinfra.admission import Request, admit
from jaxinfra.admission.gobase64 import IllegalBase64, decode, illegal_at
from jaxinfra.errors import Refused
from tests.support.paths import ROOT

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("value", "offset"),
    [
        ("admin", 4),
        ("billy", 4),
        ("dfs", 0),
        ("<foo>", 0),
        ("${PASSWORD_B64}", 0),
        ("APIKEY_BASE64", 6),
        ("QQ=", 3),  # "==" due, the text ends
        ("QU=A", 2),  # "==" due, another character instead
        ("Q===", 1),  # padding after one character
        ("QUJD==", 4),  # padding where a quantum starts
        ("QUI=QUI=", 4),  # anything after the padding
        ("QUJDé", 4),  # offsets count UTF-8 bytes
        ("QUJD-_", 4),  # the URL alphabet is not the standard one
    ],
)
def test_a_value_go_refuses_names_the_byte_go_names(value: str, offset: int) -> None:
    assert illegal_at(value) == offset
    with pytest.raises(IllegalBase64, match=f"^illegal base64 data at input byte {offset}$"):
        decode(value)


@pytest.mark.parametrize(("value", "raw"), [("bill", b"n)e"), ("", b""), ("QQ==", b"A"), ("QUI=\r\n", b"AB")])
def test_a_value_go_reads_decodes_to_its_bytes(value: str, raw: bytes) -> None:
    assert decode(value) == raw and illegal_at(value) is None


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=80))
def test_standard_base64_decodes_whatever_its_line_breaks(raw: bytes, width: int) -> None:
    text = base64.b64encode(raw).decode()
    wrapped = "\n".join(text[i : i + width] for i in range(0, len(text), width)) + "\r\n"  # base64 -w WIDTH, CRLF
    assert decode(text) == decode(wrapped) == raw


CONFIG_MAP: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "cfg", "namespace": "default"},
    "data": {"train.yaml": "steps: 10"},
    "binaryData": {"vocab.bin": "AAECAw==", "wrapped.bin": "AAEC\nAw==\n"},
}
SECRET: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "creds"},
    "data": {"password": "cGFzcw=="},
    "stringData": {"user": "admin"},
}


def refusals(*docs: dict[str, Any]) -> list[Refused]:
    out = admit([Request("in.yaml", i, doc) for i, doc in enumerate(docs)])
    assert all(isinstance(p, Refused) for p in out.problems)
    return list(out.problems)  # type: ignore[arg-type]


def test_base64_bytes_are_stored() -> None:
    out = admit([Request("in.yaml", 0, CONFIG_MAP), Request("in.yaml", 1, SECRET)])
    assert out.problems == [] and len(out.stored) == 2


def test_binary_data_that_is_not_base64_refuses_the_config_map() -> None:
    bad = {**CONFIG_MAP, "binaryData": {**CONFIG_MAP["binaryData"], "model.bin": "not base64!"}}
    [problem] = refusals(bad)
    assert problem.where == 'in.yaml#0 ConfigMap/cfg binaryData["model.bin"]' and problem.value == "not base64!"
    assert problem.message.startswith("illegal base64 data at input byte 3: ")
    assert 'ConfigMap in version "v1" cannot be handled as a ConfigMap' in problem.message
    assert "base64 -w0" in problem.fix and "in data" in problem.fix


def test_every_secret_value_that_is_not_base64_is_named_at_once() -> None:
    bad = {**SECRET, "data": {"user": "admin", "password": "cGFzcw==", "token": "<foo>"}}
    found = {p.path: p.message.split(":")[0] for p in refusals(bad)}
    assert found == {
        "Secret/creds data.token": "illegal base64 data at input byte 0",
        "Secret/creds data.user": "illegal base64 data at input byte 4",
    }
    assert all("stringData" in p.fix for p in refusals(bad))


def test_a_refused_object_is_not_stored_and_the_others_are() -> None:
    out = admit([Request("in.yaml", 0, {**SECRET, "data": {"k": "x"}}), Request("in.yaml", 1, CONFIG_MAP)])
    assert [obj["kind"] for _, obj in out.stored] == ["ConfigMap"] and len(out.problems) == 1


@pytest.mark.simulator
def test_validate_and_simulate_exit_2_naming_each_bad_value(tmp_path: Path) -> None:
    manifest = tmp_path / "config.yaml"
    bad_map = {**CONFIG_MAP, "binaryData": {"model.bin": "dfs"}}
    manifest.write_text(yaml.safe_dump_all([bad_map, {**SECRET, "data": {"user": "billy"}}]))
    for command in ("validate", "simulate"):
        r = subprocess.run(
            [sys.executable, "-m", "jaxinfra", command, str(manifest)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=180,
        )
        out = r.stdout + r.stderr
        assert r.returncode == 2 and "Traceback" not in out, out
        errors = [line for line in out.splitlines() if line.startswith("error: ")]
        assert any('ConfigMap/cfg binaryData["model.bin"]' in e and "input byte 0" in e for e in errors), out
        assert any("Secret/creds data.user" in e and "input byte 4" in e for e in errors), out
