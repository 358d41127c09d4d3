"""The common spelling of a URL, recognised in one regular expression.

Most links a crawl meets are absolute http(s) URLs that need no repair: a
lowercase scheme, a lowercase DNS name (or a dotted-quad IPv4 address), an
optional decimal port, and a path and query of characters that are safe as
they stand (no ``%``, no whitespace, no backslash). `fast_parts` recognises
exactly those and returns their pieces; for anything else it returns None
and `courtly.core.urls` takes its full path (leniency, IDNA, IPv4 forms,
escapes, userinfo, ...).

Rules: what is read here must be what the full path of `courtly.core.urls`
derives for the same URL (test_urlfast.py::test_fast_path_matches_full_path_on_the_corpus
compares the two on a corpus of tricky URLs, and its neighbours on generated ones). It is conservative: whatever
it is unsure of (``xn--`` labels, an IPv4 host not written as a canonical
dotted quad, a port with a leading zero, a host longer than 253 octets) goes
to the full path. Everything is decided inside the one expression (a Python
step costs as much as a dozen characters of matching). Pure: no state.
"""

from __future__ import annotations

import re

__all__ = ["DEFAULT_PORTS", "common_match", "fast_parts"]

# Host: a dotted quad as `ipaddress` writes it, or at most 253 octets of
# lowercase labels (at most 63 each) none of which starts with "xn--" and the
# last of which is neither a number nor "0x..." (those are IPv4 forms).
# Port: decimal, at most 65535, no leading zero on five digits. Path: RFC 3986
# pchar and "/" without "%" (an escape may need rewriting); query: the same
# and "?", put first in its class: after the closing "-" of _PATH_CHARS it
# made a range "/-?" that let "<" and ">" through unescaped. Fragment:
# anything (it is dropped).
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_END = r"(?=[:/?#]|\Z)"
_LABEL = r"(?!xn--)[a-z0-9_-]{1,63}"
_PATH_CHARS = r"A-Za-z0-9._~!$&'()*+,;=:@/-"
_COMMON_RE = re.compile(
    r"(https?)://(?![^:/?#]{254})"
    rf"((?:{_LABEL}\.)*(?![0-9]+{_END})(?!0x){_LABEL}|(?:{_OCTET}\.){{3}}{_OCTET})"
    r"(?::(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5]?[0-9]{1,4}))?"
    rf"(/[{_PATH_CHARS}]*+)?"   # possessive: what follows starts with a character
    rf"(?:\?([?{_PATH_CHARS}]*+))?"   # outside the class, so backtracking cannot help
    r"(#.*)?",
    re.S,
)
DEFAULT_PORTS = {"http": 80, "https": 443}

common_match = _COMMON_RE.fullmatch
"""`common_match(url)`: the match of a URL in the common spelling, or None.
Groups: scheme, host, port as written (or None), path (or None), query (or
None: no "?"), fragment with its "#" (or None)."""


def fast_parts(url: str) -> tuple[str, str, int, str, str | None] | None:
    """(scheme, host, port, path, query or None) of a URL in the common
    spelling, as `courtly.core.urls` would split it; None when the full
    parser must decide."""
    m = _COMMON_RE.fullmatch(url)
    if m is None:
        return None
    scheme, host, port_text, path, query, _fragment = m.groups()
    port = DEFAULT_PORTS[scheme] if port_text is None else int(port_text)
    return scheme, host, port, path or "", query
