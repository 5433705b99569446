"""A NetworkPolicy as the API server's validation step checks its spec, with the API server's messages.

Emulated from kubernetes/kubernetes @ 019c5dc51786 pkg/apis/networking/validation/validation.go ValidateNetworkPolicy,
ValidateNetworkPolicySpec, ValidateNetworkPolicyPort, ValidateNetworkPolicyPeer and ValidateIPBlock (the commit is
the stored version read); staging/src/k8s.io/apimachinery/pkg/util/validation/ip.go @ 692785d25b68
IsValidCIDRForLegacyField and parseCIDR (its message); kubernetes/utils @ a3a77f330535 net/parse.go ParseCIDRSloppy
(Go's net.ParseCIDR, retried with the leading zeros of an IPv4 address's octets and of the prefix stripped). The
facts carried over:

- a port's `protocol` is TCP, UDP or SCTP (defaulting fills TCP: `defaults._network_policy`); a numeric `port` (an
  IntOrString holding a number, 70000 included) is 1-65535; a named one (a string, digits included) an IANA service
  name (`names.port_name`); `endPort` only beside a numeric `port`, at least `port` and at most 65535.
- a peer sets at least one of `podSelector`, `namespaceSelector` and `ipBlock`, and `ipBlock` alone; the selectors
  are label selectors (`meta.validate_selector`), the policy's own `podSelector` too.
- an `ipBlock` has a `cidr`; it and each `except` parse as CIDRs; each `except` lies strictly inside `cidr` (its
  address in it, its prefix longer).
- `policyTypes` holds at most two values, each Ingress or Egress.

The StrictIPCIDRValidation gate is alpha and off (pkg/features/kube_features.go: Alpha, default false, since 1.33), so
a CIDR with host bits set (10.0.0.1/8) or leading zeros is accepted, as the API server accepts it. Updates are not
emulated (ValidateNetworkPolicyUpdate's old CIDRs): every object here is a create. Knowingly not emulated: leading
zeros in the IPv4 part of an IPv6 address (::ffff:010.1.2.3/120), which the retry strips and Python's parser refuses.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from typing import Any

from jaxinfra.admission.decoded import as_list, as_map, is_int
from jaxinfra.admission.goformat import go_quote
from jaxinfra.admission.store import Finding, Path
from jaxinfra.admission.validation.messages import (
    Raw,
    forbidden,
    invalid_each,
    invalid_value,
    not_supported,
    required_value,
)
from jaxinfra.admission.validation.meta import validate_selector
from jaxinfra.admission.validation.names import PORT_RANGE, port_name

PROTOCOLS = ("TCP", "UDP", "SCTP")  # the order the API server lists them in
POLICY_TYPES = ("Ingress", "Egress")
_BIG = 0xFFFFFF  # Go net's dtoi (a CIDR's prefix length) gives up past this
_CIDR = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
_PORT_FIX = "use a port from 1 to 65535, or the name of a container port"
_NAME_FIX = "name a container port: at most 15 lowercase letters, digits and single '-', with at least one letter"


def _dtoi(text: str) -> tuple[int, int] | None:
    """Go net's dtoi: the decimal number at the start of `text` and its length (None: no digit, or too large)."""
    n = i = 0
    while i < len(text) and text[i].isascii() and text[i].isdigit():
        n = n * 10 + int(text[i])
        if n >= _BIG:
            return None
        i += 1
    return (n, i) if i else None


def _ipv4(text: str) -> ipaddress.IPv4Address | None:
    """Four dotted decimal octets, leading zeros stripped (010 is 10), as ParseCIDRSloppy's retry reads them."""
    octets = []
    for i in range(4):
        if i:
            if not text.startswith("."):
                return None
            text = text[1:]
        read = _dtoi(text)
        if read is None or read[0] > 0xFF:
            return None
        octets.append(read[0])
        text = text[read[1] :]
    return ipaddress.IPv4Address(bytes(octets)) if not text else None


def _ipv6(text: str) -> ipaddress.IPv6Address | None:
    """netip.ParseAddr's IPv6 (at most four hex digits a group), which net.ParseCIDR takes without a zone."""
    if "%" in text:  # Python's parser would take the zone
        return None
    try:
        return ipaddress.IPv6Address(text)
    except ValueError:
        return None


def parse_cidr(text: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, int] | None:
    """netutils.ParseCIDRSloppy: the network (host bits cleared) and its prefix length as written, or None where the
    API server's parser refuses `text`. An IPv4-mapped IPv6 network stays IPv6, its prefix out of 128."""
    addr, slash, mask = text.partition("/")
    if not slash:
        return None
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = _ipv4(addr)
    bits = 32
    if ip is None:
        ip, bits = _ipv6(addr), 128
    read = _dtoi(mask)
    if ip is None or read is None or read[1] != len(mask) or read[0] > bits:
        return None
    return ipaddress.ip_network(f"{ip}/{read[0]}", strict=False), read[0]


def as_ipv4(net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """An IPv4-mapped IPv6 network (::ffff:10.1.0.0/112) as the IPv4 one it maps, as Go's IPNet.Contains reads it;
    any other network as it is."""
    mapped = net.network_address.ipv4_mapped if isinstance(net, ipaddress.IPv6Network) else None
    return ipaddress.IPv4Network(f"{mapped}/{net.prefixlen - 96}") if mapped and net.prefixlen >= 96 else net


def _ip_block(block: Mapping, at: Path) -> list[Finding]:
    """ValidateIPBlock (no old CIDRs: a create)."""
    cidr = block.get("cidr")
    if not isinstance(cidr, str) or not cidr:
        return [required_value(at + ("cidr",), "set cidr, e.g. 10.0.0.0/8")]
    fix = "write a CIDR: an address, '/', a prefix length (10.0.0.0/8)"
    parsed = parse_cidr(cidr)
    if parsed is None:
        return [invalid_value(at + ("cidr",), cidr, _CIDR, fix)]
    out: list[Finding] = []
    network, length = parsed
    outer = as_ipv4(network)
    for i, text in enumerate(as_list(block.get("except"))):
        if not isinstance(text, str):
            continue  # the schema reports it
        where = at + ("except", i)
        excepted = parse_cidr(text)
        if excepted is None:
            out.append(invalid_value(where, text, _CIDR, fix))
            continue
        address = excepted[0].network_address
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        inside = (mapped or address) in outer
        if not inside or length >= excepted[1]:
            out.append(
                invalid_value(
                    where, text, "must be a strict subset of `cidr`", f"except only CIDRs inside {cidr}, longer than it"
                )
            )
    return out


def _peer(peer: Mapping, at: Path) -> list[Finding]:
    """ValidateNetworkPolicyPeer: a field set to null is unset (Go's nil pointer)."""
    out: list[Finding] = []
    given = [f for f in ("podSelector", "namespaceSelector", "ipBlock") if peer.get(f) is not None]
    for field in given:
        if field == "ipBlock":
            out += _ip_block(as_map(peer[field]), at + (field,))
        else:
            out += validate_selector(peer[field], at + (field,))
    if not given:
        out.append(
            required_value(
                at,
                "give the peer a podSelector, a namespaceSelector (or both), or an ipBlock",
                "must specify a peer",
                dict(peer),
            )
        )
    elif len(given) > 1 and "ipBlock" in given:
        out.append(
            forbidden(
                at,
                "may not specify both ipBlock and another peer",
                "make the ipBlock a peer of its own, beside the selectors' (peers are OR'ed)",
            )
        )
    return out


def _port(entry: Mapping, at: Path) -> list[Finding]:
    """ValidateNetworkPolicyPort."""
    out: list[Finding] = []
    protocol = entry.get("protocol")
    if isinstance(protocol, str) and protocol not in PROTOCOLS:
        out.append(not_supported(at + ("protocol",), protocol, PROTOCOLS, "use TCP (the default), UDP or SCTP"))
    port, end = entry.get("port"), entry.get("endPort")
    end = end if is_int(end) else None  # another type: the schema reports it
    if is_int(port):
        if not 1 <= port <= 65535:
            out.append(invalid_value(at + ("port",), port, PORT_RANGE, _PORT_FIX))
        if end is not None:
            if end < port:
                out.append(
                    invalid_value(
                        at + ("endPort",), end, "must be greater than or equal to `port`", "set endPort >= port"
                    )
                )
            if not 1 <= end <= 65535:
                out.append(invalid_value(at + ("endPort",), end, PORT_RANGE, "use a port from 1 to 65535"))
    elif isinstance(port, str):
        if end is not None:
            detail = "may not be specified when `port` is non-numeric"
            out.append(invalid_value(at + ("endPort",), end, detail, "drop endPort, or give port as a number"))
        out += invalid_each(at + ("port",), port, port_name(port), _NAME_FIX)
    elif end is not None:
        detail = "may not be specified when `port` is not specified"
        out.append(invalid_value(at + ("endPort",), end, detail, "drop endPort, or give the range's first port"))
    return out


def _policy_types(types: Any, at: Path) -> list[Finding]:
    values = as_list(types)
    if len(values) > len(POLICY_TYPES):
        shown = Raw("[]networking.PolicyType{" + ", ".join(go_quote(str(v)) for v in values) + "}")
        return [invalid_value(at, shown, "may not specify more than two policyTypes", "list Ingress, Egress or both")]
    return [
        not_supported(at + (i,), value, POLICY_TYPES, "use Ingress or Egress")
        for i, value in enumerate(values)
        if isinstance(value, str) and value not in POLICY_TYPES
    ]


def _structs(value: Any) -> Iterator[tuple[int, Mapping]]:
    """The items of a list of Go structs, a null item read as the zero struct (so `from: [null]` is a peer with
    nothing set); items of another type are the schema's to report."""
    for i, item in enumerate(as_list(value)):
        if item is None or isinstance(item, Mapping):
            yield i, as_map(item)


def validate_network_policy(obj: Mapping) -> list[Finding]:
    """ValidateNetworkPolicySpec: the policy's podSelector, each rule's ports then peers (ingress, then egress),
    then policyTypes."""
    spec = as_map(obj.get("spec"))
    at: Path = ("spec",)
    out = validate_selector(spec.get("podSelector"), at + ("podSelector",))
    for direction, peers in (("ingress", "from"), ("egress", "to")):
        for i, rule in _structs(spec.get(direction)):
            where = at + (direction, i)
            for j, entry in _structs(rule.get("ports")):
                out += _port(entry, where + ("ports", j))
            for j, peer in _structs(rule.get(peers)):
                out += _peer(peer, where + (peers, j))
    return out + _policy_types(spec.get("policyTypes"), at + ("policyTypes",))
