"""The SSRF guard: which addresses are public, and what a crawl may allow."""

import pytest

import courtly
from courtly.core.netpolicy import NetPolicy, embedded_ipv4, is_public_address, parse_ip

NOT_PUBLIC = [
    "127.0.0.1", "127.255.255.254", "10.0.0.1", "172.16.0.1", "172.31.255.255",
    "192.168.1.1", "169.254.169.254", "169.254.0.1", "100.64.0.1", "100.127.255.255",
    "0.0.0.0", "0.1.2.3", "224.0.0.1", "239.255.255.250", "255.255.255.255", "240.0.0.1",
    "192.0.2.1", "198.51.100.7", "203.0.113.9", "198.18.0.1", "192.0.0.8",
    "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1", "fec0::1",
    "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1",
    "64:ff9b::7f00:1", "64:ff9b::a00:1", "2002:7f00:1::1", "2002:a00:1::",
    "2001:db8::1", "fe80::1%eth0", "[::1]",
]
PUBLIC = [
    "8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0",
    "172.15.255.255", "172.32.0.0", "2606:4700:4700::1111", "2a00:1450:4001::200e",
    "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
]


@pytest.mark.parametrize("ip", NOT_PUBLIC)
def test_non_public_addresses_are_refused(ip):
    assert not is_public_address(ip)
    assert not courtly.is_public_address(ip)


@pytest.mark.parametrize("ip", PUBLIC)
def test_public_addresses_are_accepted(ip):
    assert is_public_address(ip)


@pytest.mark.parametrize("garbage", ["", "localhost", "example.com", "999.1.1.1", "1.2.3", "::g",
                                     "8.8.8.8%eth0", "8.8.8.8%.evil.test", "8.8.8.8%", "2606:4700::1%"])
def test_garbage_is_not_public(garbage):
    assert not is_public_address(garbage)


def test_zone_id_belongs_to_ipv6_only():
    # "8.8.8.8%.evil.test" is a name: judged as 8.8.8.8 it would be handed to
    # connect(), whose getaddrinfo looks it up in DNS (a second resolution)
    assert parse_ip("8.8.8.8%.evil.test") is None
    assert str(parse_ip("fe80::1%eth0")) == "fe80::1"
    assert not NetPolicy().permits("93.184.216.34%25.evil.test")


def test_teredo_is_judged_by_the_client_address_it_hides():
    # client 127.0.0.1 obfuscated (bit-inverted) in the low 32 bits
    teredo = "2001:0:4136:e378:8000:63bf:80ff:fffe"
    assert str(embedded_ipv4(parse_ip(teredo))) == "127.0.0.1"
    assert not is_public_address(teredo)


def test_allowed_network_permits_only_that_network():
    policy = NetPolicy(("127.0.0.0/8",))
    assert policy.permits("127.0.0.5")
    assert policy.permits("::ffff:127.0.0.5")  # mapped form of an allowed address
    assert not policy.permits("10.0.0.1")
    assert not policy.permits("169.254.169.254")
    assert policy.permits("8.8.8.8")
    assert policy.is_loopback_only()
    assert not NetPolicy(("10.0.0.0/8",)).is_loopback_only()


@pytest.mark.parametrize("ip", [
    "64:ff9b::7f00:5",                         # NAT64: the translator's 127.0.0.5, not ours
    "2002:7f00:5::",                           # 6to4: a relay's business
    "2001:0:4136:e378:8000:63bf:80ff:fffa",    # Teredo, client 127.0.0.5
    "::127.0.0.5",                             # IPv4-compatible (deprecated): routed as IPv6
])
def test_allowed_network_does_not_open_other_v6_forms_of_it(ip):
    # Only the IPv4-mapped form is the same destination as the IPv4 address
    # (the kernel connects ::ffff:a.b.c.d to a.b.c.d); the other forms go to
    # another machine, or nowhere, and are not in the listed network.
    policy = NetPolicy(("127.0.0.0/8",))
    assert policy.permits("::ffff:127.0.0.5")
    assert not policy.permits(ip)


def test_default_policy_refuses_loopback():
    assert not NetPolicy().permits("127.0.0.1")


def test_bad_network_is_a_value_error():
    with pytest.raises(ValueError):
        NetPolicy(("not-a-network",))


def _resolver(table):
    def resolve(host):
        if host not in table:
            raise OSError("NXDOMAIN")
        return table[host]
    return resolve


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/", "http://192.168.0.1:8080/admin", "http://[::1]/", "http://[::ffff:127.0.0.1]/",
    "http://2130706433/", "http://0x7f000001/", "http://0177.0.0.1/", "http://127.1/",
    "http://localhost/", "http://rebind.example/", "http://mixed.example/", "http://nxdomain.example/",
    "ftp://example.com/", "not a url",
])
def test_target_allowed_refuses_ssrf_bait(url):
    resolve = _resolver({
        "localhost": ["127.0.0.1"], "rebind.example": ["10.1.2.3"],
        "mixed.example": ["93.184.216.34", "127.0.0.1"], "example.com": ["93.184.216.34"],
    })
    assert not courtly.target_allowed(url, resolve)


@pytest.mark.parametrize("url", ["http://example.com/", "https://example.com:8443/x?y#z", "http://93.184.216.34/"])
def test_target_allowed_accepts_public_targets(url):
    assert courtly.target_allowed(url, _resolver({"example.com": ["93.184.216.34"]}))
