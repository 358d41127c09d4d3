"""The fetcher's URL split: the fast reading of a URL in the common spelling
against yarl's (`_split_url_parsed`, the path every other URL takes).

What is sent (Host header, request target), where it goes (scheme, host,
port) and what the address check sees (the host) must not depend on which
path read the URL; so for every input the two return the same tuple or both
refuse it as invalid_url."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.shell.fetcher import _Failed, _split_url, _split_url_parsed

PROPERTY = settings(max_examples=3000, deadline=None, derandomize=True, database=None)

CORPUS = [
    "http://a.example", "http://a.example/", "http://a.example?q=1", "http://a.example/x?", "http://a.example/x?q",
    "http://a.example:0/", "http://a.example:80/", "http://a.example:0080/x", "http://a.example:8080",
    "https://a.example:443/", "https://a.example:80/", "http://a.example:65535/", "http://a.example:65536/",
    "http://a_b.example/", "http://-a-.test/", "http://1.2.3.com/", "http://a.test??", "http://a.test/x??a=1",
    "http://10.0.0.1:8080/x", "http://127.0.0.1/", "http://0.0.0.0/", "http://255.255.255.255/", "http://2130706433/",
    "http://0x7f.1/", "http://127.1/", "http://[::1]/", "http://[::1]:8080/x", "http://[fe80::1%25eth0]/",
    "http://xn--nxasmq6b.example/", "http://XN--nxasmq6b.example/", "http://m\u00fcnchen.example/",
    "http://A.Example/X", "HTTP://a.example/", "ftp://a.example/", "http:///x", "http://", "http:a.example",
    "http://a.example./", "http://a.example/a b", "http://a.example/%41%zz", "http://a.example/caf\u00e9",
    "http://user:pw@a.example/", "http://a.example/x#frag", "http://a.example/x\r\nHost: evil", "http://a.example/\t",
    "http://" + "a" * 63 + ".example/", "http://" + "a" * 64 + ".example/", "http://" + "a." * 126 + "b/",
    "http://a.example/~!$&'()*+,;=:@x?q=a/b?c", "https://a.example/p;jsessionid=1",
]


def _split(fn, url: str):
    try:
        return fn(url)
    except _Failed as exc:
        return ("refused", exc.kind)


@pytest.mark.parametrize("url", CORPUS)
def test_split_url_reads_the_corpus_as_yarl_does(url: str) -> None:
    assert _split(_split_url, url) == _split(_split_url_parsed, url)


_LABEL = st.text(alphabet="abcxyz019-_.AZ", min_size=0, max_size=12)
_HOSTS = st.one_of(
    st.lists(_LABEL, min_size=1, max_size=4).map(".".join),
    st.sampled_from(["127.0.0.1", "10.1.2.3", "1.2.3.4.5", "0x7f.1", "[::1]", "[::ffff:127.0.0.1]", "xn--a.b",
                     "a.xn--b", "007.1.2.3", "256.1.1.1", "a.123", "a.0x1f", ""]),
)
_PORTS = st.one_of(st.just(""), st.text(alphabet="0123456789", min_size=0, max_size=6).map(lambda p: ":" + p))
_PATHS = st.text(alphabet="/abc.~%?#;=&:@ \t\u00e9AZ09-_!$'()*+,[]", max_size=20)


@PROPERTY
@given(st.sampled_from(["http", "https", "HTTP", "ftp"]), _HOSTS, _PORTS, _PATHS)
def test_split_url_reads_generated_urls_as_yarl_does(scheme: str, host: str, port: str, path: str) -> None:
    url = f"{scheme}://{host}{port}{path}"
    assert _split(_split_url, url) == _split(_split_url_parsed, url)
