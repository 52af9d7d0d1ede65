"""Which addresses the server may reach for web fetch and the MCP connector: public ones only.

`ipaddress.is_global` alone is not enough. On Python 3.11 it calls global the IPv6 forms that
carry an IPv4 address (NAT64 `64:ff9b::7f00:1` is 127.0.0.1 on a host behind NAT64/DNS64, 6to4
`2002:a9fe:a9fe::1` the cloud metadata address) and several special-purpose ranges (site-local
`fec0::/10`, SRv6 `5f00::/16`, documentation `3fff::/20`, multicast, `192.0.0.0/24`). So:

- an address that embeds IPv4 (NAT64 `64:ff9b::/96` and local-use `64:ff9b:1::/48`, 6to4
  `2002::/16`, Teredo `2001::/32`, IPv4-mapped, -translated and -compatible) is judged by the
  IPv4 it carries, every one of them (Teredo carries two);
- any other address must pass `is_global` and lie outside `REFUSED`, the ranges of IANA's IPv4
  and IPv6 special-purpose registries that are not globally reachable, multicast, and (IPv6)
  everything outside global unicast `2000::/3`.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

__all__ = ["REFUSED", "embedded_ipv4", "is_public"]

IPAddress = IPv4Address | IPv6Address

REFUSED: tuple[IPv4Network | IPv6Network, ...] = tuple(
    ip_network(network)
    for network in (
        # IPv4 (IANA IPv4 special-purpose registry, multicast, reserved)
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",
        "100.64.0.0/10",  # shared address space (CGNAT)
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local, cloud metadata
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments (DS-Lite, NAT64 discovery, ...)
        "192.0.2.0/24",  # TEST-NET-1
        "192.88.99.0/24",  # 6to4 relay anycast (deprecated)
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # TEST-NET-2
        "203.0.113.0/24",  # TEST-NET-3
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and 255.255.255.255 broadcast
        # IPv6 (IANA IPv6 special-purpose registry, multicast, deprecated site-local)
        "::/128",
        "::1/128",
        "100::/64",  # discard-only
        "100:0:0:1::/64",  # dummy prefix
        "2001::/23",  # IETF protocol assignments (ORCHID 2001:10::/28, ORCHIDv2 2001:20::/28, ...)
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation
        "5f00::/16",  # SRv6 SIDs
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated, still routed by some hosts)
        "ff00::/8",  # multicast
    )
)
_GLOBAL_UNICAST = IPv6Network("2000::/3")  # all the IPv6 space IANA has allocated for unicast

_NAT64 = IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = IPv6Network("64:ff9b:1::/48")
_SIXTOFOUR = IPv6Network("2002::/16")
_TEREDO = IPv6Network("2001::/32")
_MAPPED = IPv6Network("::ffff:0:0/96")
_TRANSLATED = IPv6Network("::ffff:0:0:0/96")
_COMPATIBLE = IPv6Network("::/96")


def is_public(address: str) -> bool:
    """Whether the server may connect to `address` (an IP address as a resolver gives it, an
    IPv6 zone allowed); anything that does not parse is not."""
    try:
        ip = ip_address(address.split("%")[0])
    except ValueError:
        return False
    return _public(ip)


def _public(ip: IPAddress) -> bool:
    if isinstance(ip, IPv6Address):
        carried = embedded_ipv4(ip)
        if carried is not None:  # the packet ends up at the IPv4 address: judge that one
            return bool(carried) and all(_public(inner) for inner in carried)
        if ip not in _GLOBAL_UNICAST:
            return False
    return ip.is_global and not any(ip in network for network in REFUSED)


def embedded_ipv4(ip: IPv6Address) -> tuple[IPv4Address, ...] | None:
    """The IPv4 addresses an IPv6 address carries (None: it is not such a form; empty: it is
    one, but which IPv4 it carries cannot be told)."""
    low32 = IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _NAT64 or ip in _MAPPED or ip in _TRANSLATED or ip in _COMPATIBLE:
        return (low32,)
    if ip in _NAT64_LOCAL:
        # RFC 6052 lets a local-use prefix be /48 to /96, each placing the IPv4 elsewhere; only
        # the /96 layout (bits 48-95 zero) is read, any other is refused rather than guessed.
        return (low32,) if (int(ip) >> 32) & ((1 << 48) - 1) == 0 else ()
    if ip in _SIXTOFOUR:
        return (IPv4Address((int(ip) >> 80) & 0xFFFFFFFF),)
    if ip in _TEREDO:
        server = IPv4Address((int(ip) >> 64) & 0xFFFFFFFF)
        client = IPv4Address(~int(ip) & 0xFFFFFFFF)
        return (server, client)
    return None
