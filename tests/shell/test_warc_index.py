"""The CDXJ index's SURT keys: the shortcut for plain URLs gives what the surt library gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from courtly.shell.warc_index import _surt_key

# -- the SURT shortcut of the CDXJ index agrees with the surt library -----------------

_LABEL = st.from_regex(r"[a-z0-9-]{1,8}", fullmatch=True)
_NAME_HOST = st.tuples(st.sampled_from(["", "www.", "www2.", "www.www.", "awww."]),
                       st.lists(_LABEL, max_size=3),
                       st.from_regex(r"[a-z][a-z0-9-]{0,6}", fullmatch=True)).map(
    lambda t: t[0] + "".join(label + "." for label in t[1]) + t[2])
_PATH = st.from_regex(r"(/[A-Za-z0-9_~.-]{0,8}){0,4}/?", fullmatch=True)
_ODD = st.sampled_from(["", ":8080", "?b=2&a=1", "?jsessionid=1", ";sid=2", "%41", "//x", "/./x", "/../x",
                        "#frag", "/a b"])


@settings(max_examples=400, deadline=None)
@given(scheme=st.sampled_from(["http", "https"]), host=_NAME_HOST,
       port=st.sampled_from(["", ":80", ":443", ":8080", ":38285", ":0", ":080", ":65535", ":99999"]),
       path=_PATH, odd=_ODD)
def test_surt_keys_equal_the_surt_librarys(scheme: str, host: str, port: str, path: str, odd: str) -> None:
    import surt

    url = f"{scheme}://{host}{port}{path}{odd}"
    try:
        expected = surt.surt(url)
    except Exception:  # noqa: BLE001 - the index falls back to the URL itself
        expected = url
    assert _surt_key(url) == expected


@pytest.mark.parametrize("url", [
    "https://www.acme1.test/blog/7/Some-Article", "http://www2.example.com/", "http://example.com",
    "https://acme1.test/x/", "https://www.example.co.uk/a-b_c.d~e", "https://awww.example.com/a",
    "https://1.2.3.4/a", "https://0x7f.1/", "http://123/", "https://xn--bcher-kva.example/",
    "http://blog.acme1.test:38285/about/bribapa-4.html", "http://www.acme1.test:80/", "https://x.test:443/a/",
    "https://x.test:80/", "http://x.test:443/",
])
def test_surt_keys_of_common_and_tricky_urls(url: str) -> None:
    import surt

    assert _surt_key(url) == surt.surt(url)


# -- the CDXJ JSON block is what json.dumps makes of the fields ------------------------


def _cdxj_line_by_json_dumps(e, filename: str) -> str:
    import json

    fields = {"url": e.url}
    for key in ("mime", "status", "digest"):
        if getattr(e, key) is not None:
            fields[key] = getattr(e, key)
    fields.update(length=str(e.length), offset=str(e.offset), filename=filename)
    return f"{_surt_key(e.url)} {e.timestamp} {json.dumps(fields)}"


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(url=st.one_of(_TEXT.map(lambda t: "http://example.com/" + t), _TEXT),
       mime=st.one_of(st.none(), _TEXT), status=st.one_of(st.none(), st.sampled_from(["200", "404", '"'])),
       digest=st.one_of(st.none(), st.just("sha1:ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")),
       offset=st.integers(0, 2**40), length=st.integers(0, 2**31), filename=_TEXT)
def test_cdxj_lines_equal_json_dumps_of_the_fields(url, mime, status, digest, offset, length, filename) -> None:
    from courtly.shell.warc_index import IndexEntry, _cdxj_lines

    e = IndexEntry(url, "20261130160435", mime, status, digest, offset, length)
    assert _cdxj_lines([e], filename) == [_cdxj_line_by_json_dumps(e, filename)]
