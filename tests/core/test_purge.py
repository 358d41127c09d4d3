"""Takedown scopes (core/purge.py): what a domain, host or URL prefix purge covers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from courtly.core.purge import Purge, PurgeError, PurgeList, Scope, purge_of


def _list(*purges: Purge) -> PurgeList:
    return PurgeList(tuple(purges))


def test_domain_purge_covers_the_domain_and_every_subdomain_on_any_port_and_scheme():
    pl = _list(purge_of("domain", "media0.test", id=1))
    for url in ("http://media0.test/", "https://media0.test:8443/a?b=1", "http://www.media0.test/",
                "http://news.media0.test:8123/x/y.html", "http://a.b.media0.test/"):
        assert pl.match(url) is not None, url


def test_domain_purge_leaves_lookalikes_alone():
    pl = _list(purge_of("domain", "media0.test", id=1))
    for url in ("http://xmedia0.test/", "http://media0.test.evil.example/", "http://media1.test/",
                "http://other.test/media0.test/", "http://other.test/?u=http://media0.test/"):
        assert pl.match(url) is None, url


def test_host_purge_covers_exactly_that_host():
    pl = _list(purge_of("host", "news.media0.test", id=1))
    assert pl.match("http://news.media0.test:8000/a") is not None
    assert pl.match("https://news.media0.test/") is not None
    assert pl.match("http://www.media0.test/") is None
    assert pl.match("http://media0.test/") is None
    assert pl.match("http://x.news.media0.test/") is None


def test_url_prefix_purge_is_a_string_prefix_of_the_normalised_url():
    pl = _list(purge_of("url_prefix", "HTTP://Site.TEST:80/private", id=1))
    assert pl.purges[0].value == "http://site.test/private"
    assert pl.match("http://site.test/private") is not None
    assert pl.match("http://site.test/private/x.html") is not None
    assert pl.match("http://site.test/private-2") is not None
    assert pl.match("http://site.test/public") is None
    assert pl.match("https://site.test/private") is None      # another scheme is another prefix
    assert pl.match("http://site.test:8080/private") is None  # and so is another port


def test_url_prefix_without_a_path_covers_the_whole_origin():
    pl = _list(purge_of("url_prefix", "http://site.test", id=1))
    assert pl.match("http://site.test/anything?q=1") is not None
    assert pl.match("http://site.test:81/") is None


def test_purge_values_are_normalised_like_crawled_urls():
    assert purge_of("domain", " Example.ORG. ").value == "example.org"
    assert purge_of("host", "WWW.Example.org").value == "www.example.org"
    assert purge_of("domain", "bücher.example").value == "xn--bcher-kva.example"
    p = purge_of("domain", "bücher.example", id=3)
    assert _list(p).match("http://www.xn--bcher-kva.example/") is p


@pytest.mark.parametrize("scope, value, message", [
    ("domain", "com", "public suffix"),
    ("domain", "co.uk", "public suffix"),
    ("domain", "", "empty"),
    ("domain", "example.org/path", "bare name"),
    ("host", "user@example.org", "bare name"),
    ("url_prefix", "ftp://example.org/", "bad URL prefix"),
    ("url_prefix", "/relative", "bad URL prefix"),
    ("everything", "example.org", "scope must be one of"),
])
def test_bad_purge_values_are_refused_with_a_message(scope, value, message):
    with pytest.raises(PurgeError, match=message):
        purge_of(scope, value)


def test_an_ip_literal_domain_purge_matches_only_that_address():
    pl = _list(purge_of("domain", "10.0.0.5", id=1))
    assert pl.match("http://10.0.0.5:8080/") is not None
    assert pl.match("http://110.0.0.5/") is None
    assert pl.match("http://10.0.0.50/") is None


def test_unparseable_urls_match_nothing():
    pl = _list(purge_of("domain", "example.org", id=1))
    assert pl.match("not a url") is None
    assert pl.match("") is None
    assert PurgeList().match("http://example.org/") is None


def test_purge_list_is_a_value():
    a = purge_of("domain", "a.test", id=1)
    b = purge_of("host", "b.test", id=2)
    first = _list(a)
    second = first.with_purges([a, b])
    assert first.purges == (a,) and second.purges == (a, b)     # known ids are not added twice
    assert second.with_purges([b]) is second
    assert second.last_id == 2 and len(second) == 2 and bool(second) and not PurgeList()
    assert second.match("http://b.test/") is b and first.match("http://b.test/") is None


def test_the_first_matching_purge_is_reported():
    a = purge_of("domain", "a.test", id=1, reason="legal")
    b = purge_of("url_prefix", "http://www.a.test/x", id=2)
    assert _list(a, b).match("http://www.a.test/x/1") is a
    assert a.describe() == "purge #1 (domain a.test): legal"
    assert a.covers("http://a.test/") and not b.covers("http://a.test/")


_label = st.text(alphabet="abcdefghij0-", min_size=1, max_size=6).filter(
    lambda s: not s.startswith("-") and not s.endswith("-") and not s.isdigit())


@given(st.lists(_label, min_size=2, max_size=5), st.lists(_label, min_size=2, max_size=4))
def test_domain_scope_is_the_host_or_a_label_suffix_of_it(host_labels, domain_labels):
    host = ".".join(host_labels) + ".test"
    domain = ".".join(domain_labels) + ".test"
    covered = host == domain or host.endswith("." + domain)
    p = Purge(Scope.DOMAIN, domain, id=1)
    assert (_list(p).match(f"http://{host}/x") is not None) == covered
