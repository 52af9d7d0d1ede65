"""The address judge web fetch and the MCP connector share: the IPv6 forms that carry an IPv4
address are judged by that address, and every special-purpose range Python 3.11's `is_global`
lets through is refused."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

import pytest

from reference_server.server_tools.addresses import embedded_ipv4, is_public

CARRYING_PRIVATE = [
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 of the cloud metadata address
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b::6440:1",  # NAT64 of 100.64.0.1 (CGNAT)
    "64:ff9b:1::a00:1",  # local-use NAT64 of 10.0.0.1
    "64:ff9b:1::7f00:1",
    "64:ff9b:1:a00:1::",  # local-use NAT64 in a layout other than /96: not guessed at
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
    "::127.0.0.1",  # IPv4-compatible
    "::a9fe:a9fe",
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:10.0.0.7",
    "::ffff:0:a00:1",  # IPv4-translated (SIIT)
    "2001:0:5db8:d822::f5ff:fffe",  # Teredo, client 10.0.0.1 (last 32 bits inverted)
    "2001:0:a00:1::a246:27dd",  # Teredo, server 10.0.0.1
]

SPECIAL_PURPOSE = [
    "0.0.0.0",
    "0.1.2.3",
    "10.1.2.3",
    "100.64.0.1",  # CGNAT
    "100.127.255.254",
    "127.0.0.1",
    "169.254.169.254",
    "172.16.0.1",
    "192.0.0.1",  # IETF protocol assignments
    "192.0.0.9",
    "192.0.0.171",
    "192.0.2.1",
    "192.88.99.1",  # 6to4 relay anycast
    "192.168.0.1",
    "198.18.0.1",  # benchmarking
    "198.19.255.255",
    "198.51.100.1",
    "203.0.113.1",
    "224.0.0.1",  # multicast
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "::",
    "::1",
    "100::1",  # discard-only
    "100:0:0:1::1",  # dummy prefix
    "2001:db8::1",  # documentation
    "2001:10::1",  # ORCHID
    "2001:20::1",  # ORCHIDv2
    "2001:2::1",  # benchmarking
    "3fff::1",  # documentation
    "5f00::1",  # SRv6 SIDs
    "fc00::1",
    "fd12:3456::1",
    "fe80::1",
    "fe80::1%eth0",
    "fec0::1",  # site-local
    "ff02::1",  # multicast
    "4000::1",  # outside global unicast
]

PUBLIC = [
    "93.184.216.34",
    "1.1.1.1",
    "8.8.8.8",
    "2606:4700:4700::1111",
    "2a00:1450:4001:80b::200e",
    "64:ff9b::5db8:d822",  # NAT64 of 93.184.216.34
    "64:ff9b:1::5db8:d822",  # local-use NAT64 (/96 layout) of the same
    "2002:5db8:d822::1",  # 6to4 of the same
    "::ffff:93.184.216.34",
    "2001:0:5db8:d822::f7fe:fffe",  # Teredo: server 93.184.216.34, client 8.1.0.1
]


@pytest.mark.parametrize("address", CARRYING_PRIVATE)
def test_an_ipv6_form_carrying_a_private_ipv4_is_refused(address):
    assert not is_public(address)


@pytest.mark.parametrize("address", SPECIAL_PURPOSE)
def test_special_purpose_ranges_are_refused(address):
    assert not is_public(address)


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address):
    assert is_public(address)


@pytest.mark.parametrize("address", ["", "not-an-address", "999.1.1.1", "example.com"])
def test_what_does_not_parse_is_refused(address):
    assert not is_public(address)


@pytest.mark.parametrize(
    ("address", "carried"),
    [
        ("64:ff9b::7f00:1", ("127.0.0.1",)),
        ("64:ff9b:1::a00:1", ("10.0.0.1",)),
        ("64:ff9b:1:a00:1::", ()),
        ("2002:a9fe:a9fe::1", ("169.254.169.254",)),
        ("::127.0.0.1", ("127.0.0.1",)),
        ("::ffff:127.0.0.1", ("127.0.0.1",)),
        ("::ffff:0:a00:1", ("10.0.0.1",)),
        ("2001:0:5db8:d822::f5ff:fffe", ("93.184.216.34", "10.0.0.1")),
        ("2606:4700:4700::1111", None),
    ],
)
def test_the_ipv4_an_address_carries(address, carried):
    expected = None if carried is None else tuple(IPv4Address(a) for a in carried)
    assert embedded_ipv4(IPv6Address(address)) == expected
