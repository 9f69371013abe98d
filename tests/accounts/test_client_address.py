"""The client's address: X-Forwarded-For read from the right, only across trusted proxies."""

import ipaddress

import pytest

from clusterui.accounts.client_address import resolve

PROXIES = (ipaddress.ip_network("10.0.0.0/24"), ipaddress.ip_network("fd00::/64"))


@pytest.mark.parametrize(("remote", "forwarded", "client"), [
    # No proxy trusted for this peer: the peer is the client, whatever it writes.
    ("203.0.113.9", "", "203.0.113.9"),
    ("203.0.113.9", "192.0.2.1", "203.0.113.9"),
    # The proxy appended the address it saw; the client wrote the left-most hops.
    ("10.0.0.2", "203.0.113.9", "203.0.113.9"),
    ("10.0.0.2", "192.0.2.1, 203.0.113.9", "203.0.113.9"),
    ("10.0.0.2", "192.0.2.1,203.0.113.9", "203.0.113.9"),
    # Two trusted proxies in a row: the first untrusted hop from the right.
    ("10.0.0.2", "192.0.2.1, 203.0.113.9, 10.0.0.7", "203.0.113.9"),
    # A client that writes a trusted address on the left gets nothing from it.
    ("10.0.0.2", "10.0.0.9, 203.0.113.9", "203.0.113.9"),
    # Every hop trusted: the furthest one.
    ("10.0.0.2", "10.0.0.5", "10.0.0.5"),
    # A proxy with nothing forwarded: the proxy itself.
    ("10.0.0.2", "", "10.0.0.2"),
    # Garbage where an address should be: stop at the proxy that passed it on.
    ("10.0.0.2", "not-an-address", "10.0.0.2"),
    ("10.0.0.2", "203.0.113.9, garbage", "10.0.0.2"),
    # IPv6, written in a canonical form.
    ("fd00::1", "2001:DB8::0:1", "2001:db8::1"),
])
def test_the_client_is_the_first_untrusted_hop_from_the_right(remote, forwarded, client):
    assert resolve(remote, forwarded, PROXIES) == client


def test_with_no_trusted_proxies_forwarded_for_is_never_read():
    assert resolve("10.0.0.2", "203.0.113.9", ()) == "10.0.0.2"
