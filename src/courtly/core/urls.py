"""URLs: parsing, normalisation, reference resolution, politeness keys.

Theory of operation
-------------------
Every URL enters the crawl through `normalize_url`, which maps the many
spellings of one resource to one string; the URL-seen store, the frontier and
the WARC index all key on that string. Normalisation is lossy on purpose
(session ids and tracking parameters go), so its rules are a value
(`NormalizeRules`) with a version number (`NORMALIZATION_VERSION`) that a crawl
records: change a rule, bump the version.

`normalize_url` applies, in order:

1. leniency: strip leading/trailing C0 controls and spaces, remove tab/CR/LF
   anywhere, and for http(s) turn ``\\`` into ``/`` before the query (what
   browsers do);
2. scheme: only ``http``/``https`` (else `Reason.SCHEME`), lowercased; an
   authority with a host is required (``http:foo`` is MALFORMED, not guessed);
3. userinfo is DROPPED (never rejected): we never send credentials, and
   keeping ``user:secret@`` out of the frontier keeps it out of logs and WARCs;
4. host: percent-decoded, IDNA (UTS-46 non-transitional mapping and the
   validity checks browsers make, see `_uts46_valid`, via the ``idna``
   package when installed, else Python's IDNA 2003 codec) to lowercase
   A-labels; WHATWG IPv4 forms (``2130706433``, ``0x7f000001``,
   ``0177.0.0.1``, ``127.1``) to a dotted quad; IPv6 compressed and bracketed
   (zone ids and IPvFuture are MALFORMED); one trailing dot dropped; ASCII
   labels may hold only ``a-z 0-9 - _``;
5. port: default (80/443) dropped, anything above 65535 MALFORMED;
6. path and query: ``%xx`` of an unreserved character decoded, other escapes
   uppercased, a ``%`` that starts no escape becomes ``%25`` (needed for
   idempotence), characters outside RFC 3986 ``pchar`` encoded as UTF-8;
7. path: ``;jsessionid=...``-style parameters removed
   (`NormalizeRules.strip_path_params`), dot segments removed (RFC 3986
   5.2.4), empty path becomes ``/``;
8. query: empty ``a&&b`` pairs dropped, configured parameters dropped
   (case-insensitive names, `strip_params` / `strip_param_prefixes`), pairs
   sorted by name (stable) unless the host is order-sensitive, empty ``?``
   dropped; fragment dropped;
9. the result longer than `length_max` is `Reason.LENGTH` (and an input longer
   than four times that is refused before any work).

Most links are already in the common spelling (lowercase scheme and host,
characters that need no escaping): `courtly.core.urlfast` recognises those
in one regular expression and only the steps that can change them run (a
canonical URL is returned as it is); the full path decides everything else,
and tests/core/test_urlfast.py holds the two to the same answers.

`normalize_url` is idempotent (property-tested). `resolve_url` is strict RFC
3986 section 5.2 with only the whitespace and backslash leniency of step 1.

Politeness keys (`registered_domain`, `politeness_key`, `partition_of`) live
in `courtly.core.sitekey`, and the origin read off a normalised URL
(`origin_of_normalized` and friends) in `courtly.core.origin`; both are
re-exported here.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import unicodedata
from dataclasses import dataclass
from types import ModuleType

from courtly.core.origin import host_of_normalized, origin_of_normalized, origin_text_of_normalized
from courtly.core.sitekey import partition_of, politeness_key, registered_domain
from courtly.core.types import Origin, Reason
from courtly.core.urlfast import DEFAULT_PORTS as _DEFAULT_PORTS
from courtly.core.urlfast import common_match, fast_parts

_idna: ModuleType | None
try:  # UTS-46 processing; optional
    import idna as _idna
except ImportError:  # pragma: no cover - exercised only without the package
    _idna = None

__all__ = [
    "UrlError",
    "NORMALIZATION_VERSION",
    "NormalizeRules",
    "DEFAULT_RULES",
    "normalize_url",
    "resolve_url",
    "escape_raw_octets",
    "remove_dot_segments",
    "split_origin",
    "host_of_normalized",
    "origin_of_normalized",
    "origin_text_of_normalized",
    "registered_domain",
    "politeness_key",
    "partition_of",
]

NORMALIZATION_VERSION: int = 1

_PORT_TEXT = {"http": "80", "https": "443"}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SUB_DELIMS = "!$&'()*+,;="
_PATH_SAFE = _UNRESERVED | frozenset(_SUB_DELIMS + ":@/")
_QUERY_SAFE = _PATH_SAFE | frozenset("?")
_HEX = frozenset("0123456789abcdefABCDEF")
_RADIX_DIGITS = {8: frozenset("01234567"), 10: frozenset("0123456789"), 16: _HEX}
# RFC 3986 appendix B, with None for an absent component.
_URI_RE = re.compile(r"(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?", re.S)
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_LABEL_RE = re.compile(r"[a-z0-9_-]+")
_DIGITS_RE = re.compile(r"[0-9]+")
_TRIM = "".join(chr(c) for c in range(0x21))  # C0 controls and space
_IDEOGRAPHIC_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


class UrlError(ValueError):
    """A URL we will not crawl; `reason` is MALFORMED, SCHEME or LENGTH."""

    def __init__(self, reason: Reason, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class NormalizeRules:
    """What `normalize_url` strips and how it orders; names are lowercase."""

    strip_params: frozenset[str] = frozenset({
        "sid", "jsessionid", "phpsessid", "aspsessionid", "sessionid", "session_id",
        "cfid", "cftoken", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "fbclid",
        "msclkid", "yclid", "twclid", "igshid", "mc_cid", "mc_eid", "_ga", "_gl",
        "mkt_tok", "_hsenc", "_hsmi", "oly_anon_id", "oly_enc_id", "vero_id",
    })
    strip_param_prefixes: tuple[str, ...] = ("utm_",)
    strip_path_params: frozenset[str] = frozenset({"jsessionid", "phpsessid", "sid", "sessionid"})
    order_sensitive_hosts: frozenset[str] = frozenset()  # host or parent domain
    keep_params_hosts: frozenset[str] = frozenset()      # host or parent domain: strip nothing
    length_max: int = 2048
    version: int = NORMALIZATION_VERSION

    def __post_init__(self) -> None:
        if self.length_max < 16:
            raise ValueError("length_max must be at least 16")
        for name in ("strip_params", "strip_path_params", "order_sensitive_hosts", "keep_params_hosts"):
            object.__setattr__(self, name, frozenset(s.lower() for s in getattr(self, name)))
        object.__setattr__(self, "strip_param_prefixes", tuple(p.lower() for p in self.strip_param_prefixes))


DEFAULT_RULES = NormalizeRules()


# --- splitting ------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _lenient(text: str) -> str:
    """Browser leniency: trim C0/space at the ends, drop tab/CR/LF, and for
    http(s) read backslashes before the query as slashes."""
    s = text.strip(_TRIM).replace("\t", "").replace("\n", "").replace("\r", "")
    return _slashes(s) if _scheme_of(s) in _DEFAULT_PORTS else s


def _scheme_of(s: str) -> str | None:
    m = _SCHEME_RE.match(s)
    return s[: m.end()].lower() if m and s[m.end() : m.end() + 1] == ":" else None


def _slashes(s: str) -> str:
    cut = min((i for i in (s.find("?"), s.find("#")) if i >= 0), default=len(s))
    return s[:cut].replace("\\", "/") + s[cut:]


def _split(s: str) -> tuple[str | None, str | None, str, str | None, str | None]:
    m = _URI_RE.fullmatch(s)
    assert m is not None  # the expression matches every string
    scheme, authority, path, query, fragment = m.groups()
    if scheme is not None and not _SCHEME_RE.fullmatch(scheme):
        raise UrlError(Reason.MALFORMED, f"bad scheme {scheme!r}")
    return scheme, authority, path, query, fragment


# --- host -------------------------------------------------------------------------


def _pct_decode_bytes(s: str) -> bytes:
    out = bytearray()
    i = 0
    while i < len(s):
        hx = s[i + 1 : i + 3]
        if s[i] == "%" and len(hx) == 2 and hx[0] in _HEX and hx[1] in _HEX:
            out.append(int(hx, 16))
            i += 3
        else:
            out += s[i].encode("utf-8", "surrogatepass")
            i += 1
    return bytes(out)


def _ipv4_number(part: str) -> int | None:
    radix = 10
    if part[:2] in ("0x", "0X"):
        part, radix = part[2:], 16
    elif len(part) > 1 and part[0] == "0":
        part, radix = part[1:], 8
    if part == "":
        return 0
    if not all(c in _RADIX_DIGITS[radix] for c in part):
        return None
    return int(part, radix)


def _ends_in_number(host: str) -> bool:
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    last = parts[-1]
    if _DIGITS_RE.fullmatch(last):
        return True
    return last[:2] in ("0x", "0X") and all(c in _HEX for c in last[2:])


def _parse_ipv4(host: str) -> str:
    """WHATWG IPv4 parser: decimal, hex, octal and shortened forms."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4 or any(p == "" for p in parts):
        raise UrlError(Reason.MALFORMED, f"bad IPv4 host {host!r}")
    numbers = [_ipv4_number(p) for p in parts]
    if any(n is None for n in numbers):
        raise UrlError(Reason.MALFORMED, f"bad IPv4 host {host!r}")
    nums = [n for n in numbers if n is not None]
    if any(n > 255 for n in nums[:-1]) or nums[-1] >= 256 ** (5 - len(nums)):
        raise UrlError(Reason.MALFORMED, f"IPv4 host out of range {host!r}")
    value = nums[-1] + sum(n * 256 ** (3 - i) for i, n in enumerate(nums[:-1]))
    return str(ipaddress.IPv4Address(value))


def _to_alabel(label: str) -> str:
    """The A-label of a non-ASCII label that `_uts46_map` left (NFC, every
    code point UTS-46 valid), if `_uts46_valid` passes it."""
    try:
        if _idna is None:  # pragma: no cover
            return label.encode("idna").decode("ascii")
        _uts46_valid(label)
        return "xn--" + label.encode("punycode").decode("ascii")
    except (UnicodeError, ValueError) as exc:
        raise UrlError(Reason.MALFORMED, f"bad IDN label {label!r}") from exc


def _check_alabel(label: str) -> None:
    """An ``xn--`` label must be what `_to_alabel` makes of some label: its
    punycode decodes to a label that is not ASCII, that UTS-46 mapping
    leaves as it is and `_uts46_valid` passes, and encodes back to it (one
    spelling of one host)."""
    try:
        if _idna is None:  # pragma: no cover
            label.encode("ascii").decode("idna")
            return
        ulabel = label[4:].encode("ascii").decode("punycode")
        if ulabel.isascii() or _idna.uts46_remap(ulabel, std3_rules=False, transitional=False) != ulabel:
            raise ValueError("not a label that maps to itself")
        _uts46_valid(ulabel)
        if ulabel.encode("punycode").decode("ascii") != label[4:]:
            raise ValueError("not the punycode of its label")
    except (UnicodeError, ValueError) as exc:
        raise UrlError(Reason.MALFORMED, f"bad punycode label {label!r}") from exc


def _uts46_valid(label: str) -> None:
    """Raise ValueError unless `label` (UTS-46 mapped) passes the checks
    browsers make (WHATWG: UTS-46 ToASCII, CheckHyphens off, CheckJoiners
    and CheckBidi on): no leading combining mark, ZWJ/ZWNJ only where RFC
    5892 allows them, RFC 5893's bidi rules, no ``xn--`` prefix. Not the
    `idna` package's IDNA 2008 check: it refuses symbols and emoji (☃.net,
    i❤.ws), hyphens at the ends and CONTEXTO code points that browsers
    resolve, so their links were refused as MALFORMED."""
    assert _idna is not None
    _idna.check_initial_combiner(label)
    for at, char in enumerate(label):
        if char in "\u200c\u200d" and not _idna.valid_contextj(label, at):
            raise ValueError(f"joiner not allowed at {at}")
    _idna.check_bidi(label)
    if label.startswith("xn--"):
        raise ValueError("label starts with xn--")


def _canonical_host(raw: str) -> str:
    """The canonical host, bare (an IPv6 address without brackets)."""
    if raw.startswith("["):
        inner = raw[1:-1] if raw.endswith("]") else ""
        if not inner or inner[0] in "vV" or "%" in inner:
            raise UrlError(Reason.MALFORMED, f"unsupported IPv6 literal {raw!r}")
        try:
            return ipaddress.IPv6Address(inner).compressed
        except ValueError as exc:
            raise UrlError(Reason.MALFORMED, f"bad IPv6 literal {raw!r}") from exc
    try:
        host = _pct_decode_bytes(raw).decode("utf-8")
    except UnicodeError as exc:
        raise UrlError(Reason.MALFORMED, "host is not UTF-8") from exc
    if not host.isascii():
        host = _uts46_map(host)
    host = host.lower()
    if host.endswith("."):
        host = host[:-1]
    if not host:
        raise UrlError(Reason.MALFORMED, "empty host")
    ascii_labels = [label if label.isascii() else _to_alabel(label) for label in host.split(".")]
    if _ends_in_number(".".join(ascii_labels)):  # WHATWG: after IDNA
        return _parse_ipv4(".".join(ascii_labels))
    out = ".".join(_host_label(label) for label in ascii_labels)
    if len(out) > 253:
        raise UrlError(Reason.MALFORMED, "host longer than 253 octets")
    return out


def _uts46_map(host: str) -> str:
    try:
        if _idna is not None:
            return str(_idna.uts46_remap(host, std3_rules=False, transitional=False))
        return unicodedata.normalize("NFKC", host).translate(_IDEOGRAPHIC_DOTS)  # pragma: no cover
    except (UnicodeError, ValueError) as exc:
        raise UrlError(Reason.MALFORMED, f"bad IDN host {host!r}") from exc


def _host_label(label: str) -> str:
    if label == "":
        raise UrlError(Reason.MALFORMED, "empty host label")
    if not _LABEL_RE.fullmatch(label):
        raise UrlError(Reason.MALFORMED, f"bad host label {label!r}")
    elif label.startswith("xn--"):
        _check_alabel(label)
    if len(label) > 63:
        raise UrlError(Reason.MALFORMED, "host label longer than 63 octets")
    return label


@functools.lru_cache(maxsize=65536)   # pure; links repeat the same few hosts
def _authority(authority: str, scheme: str) -> tuple[str, int]:
    """(bare canonical host, port) of an authority; userinfo dropped."""
    hostport = authority.rpartition("@")[2]
    if hostport.startswith("["):
        end = hostport.find("]")
        raw_host, rest = (hostport[: end + 1], hostport[end + 1 :]) if end >= 0 else (hostport, "")
        if rest and not rest.startswith(":"):
            raise UrlError(Reason.MALFORMED, f"junk after IPv6 literal {authority!r}")
        port_text = rest[1:]
    else:
        raw_host, _, port_text = hostport.partition(":")
    host = _canonical_host(raw_host)
    if port_text == "":
        return host, _DEFAULT_PORTS[scheme]
    if not _DIGITS_RE.fullmatch(port_text) or int(port_text) > 65535:
        raise UrlError(Reason.MALFORMED, f"bad port {port_text!r}")
    return host, int(port_text)


# --- path and query -------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _safe_chars(safe: frozenset[str]) -> str:
    return "".join(sorted(safe - {"%"}))


def _escapes(s: str, safe: frozenset[str]) -> str:
    """Decode unreserved escapes, uppercase others, encode what must be."""
    if not s.strip(_safe_chars(safe)):
        return s   # only safe characters and no escape: unchanged (the common case, at C speed)
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "%":
            hx = s[i + 1 : i + 3]
            if len(hx) == 2 and hx[0] in _HEX and hx[1] in _HEX:
                ch = chr(int(hx, 16))
                out.append(ch if ch in _UNRESERVED else "%" + hx.upper())
                i += 3
                continue
            out.append("%25")
        elif c in safe:
            out.append(c)
        else:
            try:
                out.append("".join(f"%{b:02X}" for b in c.encode("utf-8")))
            except UnicodeEncodeError as exc:
                raise UrlError(Reason.MALFORMED, "lone surrogate") from exc
        i += 1
    return "".join(out)


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4."""
    if "." not in path or ("/." not in path and not path.startswith(".")):
        return path   # no "." or ".." segment: nothing to remove (the common case)
    out: list[str] = []
    i, n = 0, len(path)
    while i < n:
        if path.startswith("../", i):
            i += 3
        elif path.startswith("./", i) or path.startswith("/./", i):
            i += 2
        elif n - i == 2 and path.startswith("/.", i):
            out.append("/")
            break
        elif path.startswith("/../", i):
            i += 3
            if out:
                out.pop()
        elif n - i == 3 and path.startswith("/..", i):
            if out:
                out.pop()
            out.append("/")
            break
        elif path[i:] in (".", ".."):
            break
        else:
            j = path.find("/", i + 1 if path[i] == "/" else i)
            j = n if j < 0 else j
            out.append(path[i:j])
            i = j
    return "".join(out)


def _strip_path_params(path: str, names: frozenset[str]) -> str:
    if ";" not in path or not names:
        return path
    segments = []
    for seg in path.split("/"):
        if ";" in seg:
            head, *params = seg.split(";")
            kept = [p for p in params if p.split("=", 1)[0].lower() not in names]
            seg = ";".join([head, *kept])
        segments.append(seg)
    return "/".join(segments)


def _host_in(host: str, hosts: frozenset[str]) -> bool:
    if not hosts:
        return False
    if host in hosts:
        return True
    return any(host.endswith("." + h) for h in hosts)


def _query(query: str, host: str, rules: NormalizeRules) -> str:
    """An escaped query, normalised: empty pairs and stripped parameters
    dropped, pairs sorted by name (stable) unless the host is order-sensitive."""
    pairs = [p for p in query.split("&") if p]
    if not _host_in(host, rules.keep_params_hosts):
        names, prefixes = rules.strip_params, rules.strip_param_prefixes
        pairs = [p for p in pairs
                 if (name := p.partition("=")[0].lower()) not in names and not name.startswith(prefixes)]
    if len(pairs) > 1 and not _host_in(host, rules.order_sensitive_hosts):
        pairs.sort(key=_param_name)
    return "&".join(pairs)


def _param_name(pair: str) -> str:
    return pair.partition("=")[0]


def _http_parts(url: str) -> tuple[str, str, int, str, str | None]:
    """(scheme, canonical host, port, raw path, raw query) of an absolute
    http(s) URL; raises `UrlError` (MALFORMED, SCHEME)."""
    return fast_parts(url) or _http_parts_full(url)


def _http_parts_full(url: str) -> tuple[str, str, int, str, str | None]:
    scheme, authority, path, query, _fragment = _split(_lenient(url))
    if scheme is None:
        raise UrlError(Reason.MALFORMED, "not an absolute URL")
    scheme = scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise UrlError(Reason.SCHEME, scheme)
    if not authority:
        raise UrlError(Reason.MALFORMED, "no host")
    host, port = _authority(authority, scheme)
    return scheme, host, port, path, query


# --- public -----------------------------------------------------------------------


def normalize_url(url: str, rules: NormalizeRules = DEFAULT_RULES) -> str:
    """The canonical form of an absolute http(s) URL; raises `UrlError`."""
    if len(url) > 4 * rules.length_max:
        raise UrlError(Reason.LENGTH, f"{len(url)} characters before normalisation")
    m = common_match(url)   # the common spelling: no leniency, escapes or IDNA to apply
    if m is not None:
        out = _normalize_common(m, url, rules)
    else:
        scheme, host, port, path, query = _http_parts_full(url)
        path = _escapes(path, _PATH_SAFE)
        out = _assemble(scheme, host, port, path, query and _escapes(query, _QUERY_SAFE), rules)
    if len(out) > rules.length_max:
        raise UrlError(Reason.LENGTH, f"{len(out)} > {rules.length_max}")
    return out


def _normalize_common(m: re.Match[str], url: str, rules: NormalizeRules) -> str:
    """`normalize_url` of a URL in the common spelling (`urlfast.common_match`),
    before the length check."""
    scheme, host, written_port, path, query, fragment = m.groups()
    if (path and "/." not in path and ";" not in path
            and (written_port is None or (written_port[0] != "0" and written_port != _PORT_TEXT[scheme]))):
        # scheme, authority and path are canonical as written: at most the query changes
        if query is None:
            return url if fragment is None else url[: m.start(6)]
        head = url[: m.end(4)]
        q = _query(query, host, rules) if query else ""
        return f"{head}?{q}" if q else head
    port = _DEFAULT_PORTS[scheme] if written_port is None else int(written_port)
    return _assemble(scheme, host, port, path or "", query, rules)


def _assemble(scheme: str, host: str, port: int, path: str, query: str | None, rules: NormalizeRules) -> str:
    """The URL of canonical scheme, host and port and escaped path and query:
    path parameters and dot segments removed, the query normalised."""
    path = remove_dot_segments(_strip_path_params(path, rules.strip_path_params)) or "/"
    q = _query(query, host, rules) if query else ""
    shown = f"[{host}]" if ":" in host else host
    port_text = "" if port == _DEFAULT_PORTS[scheme] else f":{port}"
    return f"{scheme}://{shown}{port_text}{path}" + (f"?{q}" if q else "")


_RAW_OCTET = re.compile("[\udc80-\udcff]")


def escape_raw_octets(text: str) -> str:
    """`text` with the raw octets that UTF-8 decoding with ``surrogateescape``
    kept as lone surrogates (an HTTP header value, a robots.txt line that is
    not UTF-8) written as ``%XX``, as browsers send such bytes of a Location.
    Anything else is left as it is. A lone surrogate is no text: a database,
    a log line or a WARC header cannot hold it, so a hostile header must not
    carry one past the first place it is read."""
    if text.isascii():
        return text
    return _RAW_OCTET.sub(lambda m: f"%{ord(m.group()) - 0xDC00:02X}", text)


def resolve_url(base: str, ref: str) -> str:
    """RFC 3986 section 5.2 reference resolution of `ref` against absolute
    `base` (strict: ``http:g`` stays ``http:g``). Not normalised."""
    b_scheme, b_auth, b_path, b_query, _ = _split(_lenient(base))
    if b_scheme is None:
        raise UrlError(Reason.MALFORMED, "base is not absolute")
    ref = ref.strip(_TRIM).replace("\t", "").replace("\n", "").replace("\r", "")
    if (_scheme_of(ref) or b_scheme.lower()) in _DEFAULT_PORTS:
        ref = _slashes(ref)
    r_scheme, r_auth, r_path, r_query, r_frag = _split(ref)
    if r_scheme is not None:
        t = (r_scheme, r_auth, remove_dot_segments(r_path), r_query)
    elif r_auth is not None:
        t = (b_scheme, r_auth, remove_dot_segments(r_path), r_query)
    elif r_path == "":
        t = (b_scheme, b_auth, b_path, r_query if r_query is not None else b_query)
    elif r_path.startswith("/"):
        t = (b_scheme, b_auth, remove_dot_segments(r_path), r_query)
    else:
        t = (b_scheme, b_auth, remove_dot_segments(_merge(b_auth, b_path, r_path)), r_query)
    scheme, auth, path, query = t
    out = f"{scheme}:" + (f"//{auth}" if auth is not None else "") + path
    out += f"?{query}" if query is not None else ""
    return out + (f"#{r_frag}" if r_frag is not None else "")


def _merge(base_auth: str | None, base_path: str, ref_path: str) -> str:
    if base_auth is not None and base_path == "":
        return "/" + ref_path
    return base_path[: base_path.rfind("/") + 1] + ref_path


def split_origin(url: str) -> Origin:
    """scheme, canonical host (IPv6 without brackets) and port of an http(s) URL."""
    scheme, host, port, _, _ = _http_parts(url)
    return Origin(scheme, host, port)
