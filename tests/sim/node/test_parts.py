"""The machine's parts a simulation uses (`jaxinfra_sim.node.parts`), checked against machines described by hand: a
fresh Debian without the CNI plugins or nft, a kernel without user namespaces, Fedora, an unknown distribution, macOS.
Each refusal names every missing part at once, with the one command that installs them all."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from jaxinfra_sim.network.netns_workers import cni_dir
from jaxinfra_sim.node import doctor, parts, runc_advisories
from jaxinfra_sim.node.parts import Distro, Found, Machine, Use

pytestmark = pytest.mark.unit

DEBIAN = Distro("debian", (), "Debian GNU/Linux 12 (bookworm)")
UBUNTU = Distro("ubuntu", ("debian",), "Ubuntu 24.04 LTS")
FEDORA = Distro("fedora", (), "Fedora Linux 41")
KERNEL = {"Linux": Found("kernel 6.1.0"), "user namespaces": Found("root's (every id mapped)", "privileged")}
NETWORK = {"CNI plugins": Found("/usr/lib/cni"), "ip": Found("/usr/sbin/ip"), "nft": Found("/usr/sbin/nft")}
EVERYTHING = {
    **KERNEL,
    **NETWORK,
    "egress": Found("/usr/bin/slirp4netns"),
    "runc": Found("/usr/sbin/runc", "1.3.3"),
    "newuidmap": Found("/usr/bin/newuidmap"),
    "umoci": Found("/usr/bin/umoci"),
    "bwrap": Found("/usr/bin/bwrap"),
    "nsenter": Found("/usr/bin/nsenter"),
    "skopeo": Found("/usr/bin/skopeo"),
    **{f"{c} cgroup": Found(f"/sys/fs/cgroup/{c}", "cgroup v2") for c in ("memory", "cpu", "pids")},
}
DEFAULT_RUN = parts.uses(run_command=False, egress=True, root=True)


def machine(found: dict[str, Found], distro: Distro = DEBIAN, root: bool = True, **why: tuple[str, str]) -> Machine:
    return Machine("linux", root, distro, found, {k.replace("_", " "): v for k, v in why.items()})


def refusal(m: Machine, used: Use = DEFAULT_RUN) -> str:
    with pytest.raises(parts.Unavailable) as caught:
        parts.require(used, m)
    assert caught.value.status == 3  # the machine's limit, not a verdict on the job
    assert "\n" not in str(caught.value)  # one line
    return str(caught.value)


def test_a_fresh_debian_is_told_every_missing_part_and_the_one_line_that_installs_them() -> None:
    said = refusal(machine(KERNEL, root=False))
    assert said.startswith("cannot simulate here: missing the CNI plugins ptp and static (they wire each pod's ")
    assert "`ip` (it makes the pods' gateway)" in said and "`nft` (it loads NetworkPolicy's" in said
    assert said.endswith(
        "fix: sudo apt-get update && sudo apt-get install -y containernetworking-plugins iproute2 nftables"
    )
    assert "slirp4netns" not in said  # egress is optional: its absence is a note, never a refusal


def test_only_what_is_missing_is_named_and_root_needs_no_sudo() -> None:
    said = refusal(machine({**KERNEL, "ip": NETWORK["ip"]}))
    assert "the CNI plugins ptp and static" in said and "`nft`" in said and "`ip`" not in said
    assert said.endswith("fix: apt-get update && apt-get install -y containernetworking-plugins nftables")


def test_a_machine_with_every_part_passes_and_optional_parts_only_show_as_off() -> None:
    assert parts.require(DEFAULT_RUN, machine(EVERYTHING)).missing == []
    survey = parts.require(DEFAULT_RUN, machine({**KERNEL, **NETWORK}))
    assert {r.part.name: r.status for r in survey.rows} == {
        "Linux": "ok",
        "user namespaces": "ok",
        "CNI plugins": "ok",
        "ip": "ok",
        "nft": "ok",
        "egress": "off",
        "memory cgroup": "off",
        "cpu cgroup": "off",
        "pids cgroup": "off",
    }
    assert survey.packages() == ["slirp4netns"]  # what --install brings: the run goes on without it, better with it
    assert survey.packages(optional=False) == []


def test_no_user_namespaces_is_named_with_the_missing_packages_and_both_fixes() -> None:
    said = refusal(
        machine(
            {"Linux": Found("kernel 6.1.0"), "ip": Found("/usr/sbin/ip")},
            root=False,
            user_namespaces=(
                "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)",
                "sudo sysctl -w kernel.unprivileged_userns_clone=1, or run it as root (sudo)",
            ),
        )
    )
    assert "missing the CNI plugins ptp and static" in said and "`nft`" in said
    assert "; unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0); fix: " in said
    assert said.endswith(
        "fix: sudo apt-get update && sudo apt-get install -y containernetworking-plugins nftables; "
        "sudo sysctl -w kernel.unprivileged_userns_clone=1, or run it as root (sudo)"
    )


def test_macos_is_told_it_needs_linux_and_how_to_get_it() -> None:
    said = refusal(Machine("darwin", False, Distro(), {}))
    assert said.startswith("cannot simulate here: this is darwin, not Linux")
    assert "Linux VM (Lima, WSL 2" in said and "jaxinfra doctor --install" in said
    assert "apt-get" not in said and "CNI" not in said  # no Linux package can help there


def test_fedora_gets_dnf_and_fedoras_names() -> None:
    said = refusal(machine(KERNEL, FEDORA, root=False), parts.uses(True, True, ["archive"], root=False))
    assert said.endswith(
        "fix: sudo dnf install -y containernetworking-plugins iproute nftables runc shadow-utils umoci bubblewrap "
        "util-linux skopeo"
    )


def test_an_unknown_distribution_gets_the_packages_by_debians_names() -> None:
    said = refusal(machine({**KERNEL, "ip": NETWORK["ip"]}, Distro("arch", (), "Arch Linux")))
    assert said.endswith(
        "fix: install them with your distribution's package manager (Debian's packages: "
        "containernetworking-plugins, nftables; the CNI plugins go in one of /usr/lib/cni, /usr/libexec/cni, "
        "/opt/cni/bin)"
    )


@pytest.mark.parametrize(
    ("run_command", "images", "root", "wanted"),
    [
        (False, [], True, set()),
        (True, [], True, {"runc"}),
        (True, [], False, {"runc", "newuidmap"}),
        (False, ["folder"], True, set()),
        (False, ["layout"], True, {"umoci", "bwrap", "nsenter"}),
        (True, ["archive", "folder"], True, {"runc", "umoci", "bwrap", "nsenter", "skopeo"}),
    ],
)
def test_each_option_adds_the_parts_it_runs(run_command: bool, images: list[str], root: bool, wanted: set[str]) -> None:
    used = parts.uses(run_command, egress=True, images=images, root=root)
    survey = parts.survey(machine({**KERNEL, **NETWORK}, root=root), used)
    assert {r.part.name for r in survey.missing} == wanted


def test_no_egress_does_not_look_for_the_egress_tool() -> None:
    survey = parts.survey(machine({**KERNEL, **NETWORK}), parts.uses(False, egress=False))
    assert "egress" not in {r.part.name for r in survey.rows}
    assert survey.packages() == []


@pytest.mark.parametrize(
    ("version", "backported", "cves"),
    [
        ("1.1.5+ds1", (), ["CVE-2024-21626", "CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"]),
        ("1.1.5+ds1 (package 1.1.5+ds1-1+deb12u1)", ("CVE-2024-21626",), ["CVE-2025-31133"]),  # Debian's backport
        ("1.1.12", (), ["CVE-2025-31133"]),
        ("1.2.7", (), ["CVE-2025-31133"]),
        ("1.2.8", (), []),
        ("1.3.2", (), ["CVE-2025-31133"]),
        ("1.3.3", (), []),
        ("1.4.0-rc.2", (), ["CVE-2025-31133"]),
        ("1.4.0", (), []),
        ("1.5.1", (), []),
        ("not a version", (), []),
    ],
)
def test_runcs_known_vulnerabilities_are_read_from_its_version_less_the_distributions_backports(
    version: str, backported: tuple[str, ...], cves: list[str]
) -> None:
    said = " ".join(runc_advisories.advisories(version, backported))
    for cve in ("CVE-2024-21626", "CVE-2025-31133"):
        assert (cve in said) == (cve in cves), said
    assert all(c in said for c in cves)


def test_a_vulnerable_runc_is_a_warning_in_the_table_never_a_refusal() -> None:
    found = {**EVERYTHING, "runc": Found("/usr/sbin/runc", "1.1.5+ds1 (package 1.1.5+ds1-1+deb12u1)")}
    survey = parts.require(parts.ALL, machine(found))
    row = next(r for r in survey.rows if r.part.name == "runc")
    assert row.status == "warning"
    assert survey.warnings() == [
        "runc 1.1.5+ds1 (package 1.1.5+ds1-1+deb12u1) has CVE-2024-21626 (a container's working directory in the "
        "machine's files (a leaked fd); fixed in runc 1.1.12): upgrade runc past it, or run --run-command only on "
        "inputs you trust",
        "runc 1.1.5+ds1 (package 1.1.5+ds1-1+deb12u1) has CVE-2025-31133, CVE-2025-52565, CVE-2025-52881 (masked "
        "paths and /dev/console mounts raced into writes of the machine's /proc (core_pattern); fixed in runc 1.2.8, "
        "1.3.3, 1.4.0): upgrade runc past it, or run --run-command only on inputs you trust",
    ]
    assert "warning: runc 1.1.5+ds1" in doctor.table(survey)
    assert parts.survey(machine(found), DEFAULT_RUN).warnings() == []  # a run without --run-command never uses it


def test_the_table_and_the_json_name_each_part_where_it_is_and_what_needs_it() -> None:
    survey = parts.survey(machine({**KERNEL, "ip": NETWORK["ip"]}, root=False), parts.uses(False, True, root=False))
    lines = doctor.table(survey).splitlines()
    assert lines[0].split() == ["part", "status", "found", "where", "version", "needed", "by"]
    cni = next(line for line in lines if line.startswith("CNI plugins"))
    assert "missing" in cni and "not in /usr/lib/cni, /usr/libexec/cni, /opt/cni/bin" in cni
    assert "every simulation" in cni
    data = doctor.as_json(survey)
    assert data["ready"] is False and data["distribution"] == "Debian GNU/Linux 12 (bookworm)"
    nft = next(p for p in data["parts"] if p["part"] == "nft")
    assert nft == nft | {"status": "missing", "required": True, "package": "nftables", "where": None}
    assert data["install"] == (
        "sudo apt-get update && sudo apt-get install -y containernetworking-plugins nftables slirp4netns"
    )
    assert data["problem"].startswith("cannot simulate here: missing the CNI plugins")


def ran(calls: list[list[str]], code: int = 0, said: bytes = b""):  # noqa: ANN201 - a stand-in for subprocess.run
    def run(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, code, b"", said)

    return run


def test_install_runs_the_package_manager_quietly_through_sudo_without_asking(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    survey = parts.survey(machine(KERNEL, UBUNTU, root=False), parts.uses(False, True, root=False))
    monkeypatch.setattr(parts, "find", {"sudo": "/usr/bin/sudo"}.get)
    assert parts.install(survey, ran(calls)) == ["containernetworking-plugins", "iproute2", "nftables", "slirp4netns"]
    quiet = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-qq"]
    assert [c[c.index("env") :] for c in calls] == [
        [*quiet, "update"],
        [*quiet, "install", "-y", "containernetworking-plugins", "iproute2", "nftables", "slirp4netns"],
    ]
    assert all(c[0] == "sudo" for c in calls)


def test_install_by_a_user_without_sudo_says_to_run_it_as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    survey = parts.survey(machine(KERNEL, UBUNTU, root=False), parts.uses(False, True, root=False))
    monkeypatch.setattr(parts, "find", lambda name: None)
    with pytest.raises(parts.Unavailable, match="needs root, and sudo is not installed") as caught:
        parts.install(survey, ran(calls))
    assert str(caught.value).endswith(
        "fix: as root: apt-get update && apt-get install -y containernetworking-plugins iproute2 nftables slirp4netns"
    )
    assert calls == []


def test_install_as_root_and_a_failed_install_say_what_to_run_by_hand() -> None:
    calls: list[list[str]] = []
    survey = parts.survey(machine(KERNEL), DEFAULT_RUN)
    with pytest.raises(parts.Unavailable) as caught:
        parts.install(survey, ran(calls, 100, b"E: Unable to locate package nftables\n"))
    assert calls == [["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-qq", "update"]]
    assert str(caught.value) == (
        "cannot simulate here: `env DEBIAN_FRONTEND=noninteractive apt-get -qq update` failed (exit status 100): E: "
        "Unable to locate package nftables; fix: run it yourself: apt-get update && apt-get install -y "
        "containernetworking-plugins iproute2 nftables slirp4netns"
    )


def test_install_has_nothing_to_do_where_nothing_is_missing_and_no_manager_it_does_not_know() -> None:
    calls: list[list[str]] = []
    assert parts.install(parts.survey(machine(EVERYTHING), parts.ALL), ran(calls)) == []
    with pytest.raises(parts.Unavailable, match="install them with your distribution's package manager"):
        parts.install(parts.survey(machine(KERNEL, Distro("arch")), DEFAULT_RUN), ran(calls))
    with pytest.raises(parts.Unavailable, match="not Linux"):
        parts.install(parts.survey(Machine("darwin", False, Distro(), {}), DEFAULT_RUN), ran(calls))
    only_optional = parts.survey(machine({**KERNEL, **NETWORK}, Distro("arch")), DEFAULT_RUN)
    assert only_optional.packages() == ["slirp4netns"]
    assert parts.install(only_optional, ran(calls)) == []  # the run goes on without it: no refusal either
    assert calls == []


@pytest.mark.parametrize(
    ("text", "family"),
    [
        ('ID=debian\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n', "debian"),
        ("ID=ubuntu\nID_LIKE=debian\n", "debian"),
        ("ID=linuxmint\nID_LIKE='ubuntu debian'\n", "debian"),
        ("ID=fedora\n", "fedora"),
        ('ID="rocky"\nID_LIKE="rhel centos fedora"\n', "fedora"),
        ("ID=arch\n", None),
        ("", None),
    ],
)
def test_the_distribution_family_comes_from_os_release(text: str, family: str | None, tmp_path: Path) -> None:
    (tmp_path / "os-release").write_text(text)
    assert Distro.read([str(tmp_path / "missing"), str(tmp_path / "os-release")]).family == family


def test_the_cni_plugins_are_taken_from_the_first_folder_that_holds_them_all(tmp_path: Path) -> None:
    debian, fedora, opt = (tmp_path / d for d in ("lib", "libexec", "opt"))
    for folder, plugins in ((debian, ["ptp"]), (fedora, ["ptp", "static"]), (opt, ["ptp", "static"])):
        folder.mkdir()
        for name in plugins:
            (folder / name).write_text("#!/bin/sh\n")
            (folder / name).chmod(0o755)
    assert cni_dir([str(debian), str(fedora), str(opt)]) == str(fedora)
    assert cni_dir([str(debian)]) == str(debian)  # none holds them all: the first, which `parts` reports missing
