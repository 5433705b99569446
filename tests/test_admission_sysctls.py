"""The API server's validation of a pod's sysctls and shareProcessNamespace (jaxinfra/admission/validation/sysctls.py):
the names the kernel's sysctl(8) writes pass, others are refused with the message a cluster prints after the field
path; a sysctl of a namespace the pod shares with its node is refused; and which namespace a sysctl lives in."""

from __future__ import annotations

from typing import Any

import pytest

from jaxinfra.admission import validation as v
from jaxinfra.admission.validation.sysctls import Namespace, namespace_of, normalize, valid_name

pytestmark = pytest.mark.unit

SC = ("spec", "template", "spec", "securityContext")


def job(sysctls: list[dict[str, Any]] | None = None, **pod: Any) -> dict[str, Any]:
    """The Kubernetes docs' sysctl example pod as a Job's template, with `pod` fields."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox:1.28", "command": ["sleep", "1"]}],
        **pod,
    }
    if sysctls is not None:
        spec["securityContext"] = {"sysctls": sysctls}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sysctl-example"},
        "spec": {"template": {"spec": spec}},
    }


def refused(obj: dict[str, Any]) -> dict[tuple[Any, ...], str]:
    return {f.at: f.message for f in v.validate(obj) if not f.warning}


def test_the_docs_example_passes() -> None:
    safe = [{"name": "kernel.shm_rmid_forced", "value": "0"}, {"name": "net.core.somaxconn", "value": "1024"}]
    assert refused(job(safe + [{"name": "kernel.msgmax", "value": "65536"}])) == {}  # the kubelet's to refuse


def test_names_and_duplicates() -> None:
    found = refused(
        job(
            [
                {"name": "", "value": "1"},
                {"name": "Kernel.ShmMax", "value": "1"},
                {"name": "net/ipv4/tcp_syncookies", "value": "1"},
                {"name": "net.ipv4.tcp_syncookies", "value": "1"},
                {"name": "net.ipv4.tcp_syncookies", "value": "0"},
            ]
        )
    )
    assert found == {
        SC + ("sysctls", 0, "name"): "Required value",
        SC + ("sysctls", 1, "name"): 'Invalid value: "Kernel.ShmMax": must have at most 253 characters and match '
        "regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$",
        SC + ("sysctls", 4, "name"): 'Duplicate value: "net.ipv4.tcp_syncookies"',
    }


def test_a_sysctl_of_a_namespace_shared_with_the_node_is_refused() -> None:
    net = [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}]
    ipc = [{"name": "kernel.shm_rmid_forced", "value": "1"}, {"name": "fs.mqueue.msg_max", "value": "10"}]
    assert refused(job(net, hostNetwork=True)) == {
        SC + ("sysctls", 0, "name"): 'Invalid value: "net.ipv4.ip_local_port_range": may not be specified when '
        "'hostNetwork' is true"
    }
    assert list(refused(job(ipc, hostIPC=True)).values()) == [
        "Invalid value: \"kernel.shm_rmid_forced\": may not be specified when 'hostIPC' is true",
        "Invalid value: \"fs.mqueue.msg_max\": may not be specified when 'hostIPC' is true",
    ]
    assert refused(job(net, hostIPC=True)) == refused(job(ipc, hostNetwork=True)) == {}


def test_share_process_namespace_with_host_pid_is_refused() -> None:
    assert refused(job(shareProcessNamespace=True, hostPID=True)) == {
        SC + ("shareProcessNamespace",): "Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled"
    }
    assert refused(job(shareProcessNamespace=True)) == refused(job(hostPID=True)) == {}


@pytest.mark.parametrize(
    ("name", "namespace"),
    [
        ("kernel.sem", Namespace.IPC),
        ("kernel.shmmax", Namespace.IPC),
        ("kernel.msgmnb", Namespace.IPC),
        ("fs.mqueue.queues_max", Namespace.IPC),
        ("net.core.somaxconn", Namespace.NET),
        ("net/ipv4/ip_forward", Namespace.NET),
        ("net.*", Namespace.NET),
        ("kernel.shm*", Namespace.IPC),
        ("kernel.core_pattern", None),
        ("vm.swappiness", None),
        ("kernel.semx", None),
        ("network.x", None),
    ],
)
def test_the_namespace_of_a_sysctl(name: str, namespace: Namespace | None) -> None:
    assert namespace_of(name) is namespace


def test_names_as_sysctl_8_writes_them() -> None:
    assert normalize("net/ipv4/conf/eth0.100/rp_filter") == "net.ipv4.conf.eth0/100.rp_filter"
    assert normalize("net.ipv4.conf.eth0/100.rp_filter") == "net.ipv4.conf.eth0/100.rp_filter"
    assert valid_name("net.ipv4.conf.eth0/100.rp_filter") and not valid_name("a" * 254)
    assert not valid_name(".net") and not valid_name("net..ipv4") and not valid_name("net.ipv4-")
