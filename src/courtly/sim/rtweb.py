"""A small web with faults, drawn from a seed, and the fakes that serve it to
the real runtime in virtual time (sim/vloop.py, sim/rtsim.py).

Theory of operation
-------------------
`draw_web(seed, size)` draws a few politeness keys (registered domains), each
with one or two hosts (`www.` and the bare name share the key), hosts sharing
an address now and then, often a shared server with many small sites behind
one address (the per-IP limits), a handful of
pages per host linking to each other and, sometimes, to another host or to a
disallowed path. Each host gets a robots.txt mode (ok, none = 404, 5xx,
unreachable), an optional Crawl-delay per key, and faults:

- latency: a log-normal answer time around a per-host median; a dripping host
  answers in seconds, not milliseconds;
- bursts: requests n .. n+k of the host are answered 429 or 503 (with or
  without Retry-After) or 500;
- refused: every connection to the host is refused (status 0, "connect");
- dns: the host name does not resolve (ResolveFailed, Reason.DNS);
- a leap: at one instant virtual time jumps forward (a suspended machine);
- a search crawl (a quarter of the webs): pages change every CHANGE_S,
  answer with an ETag and 304 to a matching If-None-Match, and are recrawled;
- a restart: the crawl is stopped (as by Ctrl-C) or aborted (a second
  Ctrl-C: the requests in flight are cut, logged with status -1) and a new
  one resumes from the store at the same instant;
- the store unavailable: from one instant, for a few seconds to past
  `store.down_s_max`, every call to the crawl's store fails as a locked
  database or a full disk does (sim/rtfaults.FlakyStore);
- a frozen process: the crawler stalls inside its first store commit or
  fetch answer after one instant: virtual time jumps while no callback runs
  (unlike a leap, which comes between callbacks), as in a long GC pause, a
  blocking disk or a swapped-out process (sim/rtfaults.Freeze).

`SimFetcher` answers from the web after the drawn latency (an
`asyncio.sleep`, so virtual) and logs every request as a `Request` row
(sent and answered instants on the crawler's clock, status, Retry-After):
the checker (sim/rtcheck.py) judges from that log, as a server would.
`SimResolver`, `SimExtractor` (the real link extraction, in process) and
`SimWarc` (records counted, nothing written) complete the ports.

Rules: every draw comes from `random.Random` seeded by the seed (or by the
seed and the URL), never from set order or the wall clock: same seed, same
web, same answers.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import urlsplit

from courtly.core.types import Reason
from courtly.shell.extract_worker import decode_page, process_task
from courtly.shell.fetcher import FetchResult
from courtly.shell.resolver import ResolveFailed

__all__ = ["ABORTED", "WebSize", "DEFAULT_SIZE", "HostFaults", "SimHost", "RuntimeWeb", "Request", "draw_web",
           "SimFetcher", "SimResolver", "SimExtractor", "SimWarc"]

ROBOTS_MODES = ("ok", "ok", "ok", "ok", "none", "5xx", "unreachable")
BURST_STATUSES = (429, 503, 500)
SHARED_IP = "203.0.113.200"
ABORTED = -1           # the status logged for a request cut by the crawler before its answer
CHANGE_S = 1800.0      # a search web's pages change this often
STORE_DOWN_S = (3.0, 20.0, 60.0, 400.0)   # the last one is past store.down_s_max (120 s): the crawl stops


@dataclass(frozen=True, slots=True)
class WebSize:
    keys_min: int = 3
    keys_max: int = 6
    pages_min: int = 3
    pages_max: int = 10
    fault_share: float = 0.5         # share of hosts with a fault besides latency
    shared_share: float = 0.5        # share of webs with a shared server (the per-IP limits)
    shared_min: int = 5              # sites on the shared server
    shared_max: int = 10


@dataclass(frozen=True, slots=True)
class HostFaults:
    latency_s: float = 0.05          # median answer time
    burst_at: int = -1               # page requests burst_at .. burst_at + burst_len - 1 fail
    burst_len: int = 0
    burst_status: int = 0
    retry_after_s: int | None = None
    refused: bool = False
    dns: bool = False
    robots: str = "ok"               # ok | none | 5xx | unreachable


@dataclass(frozen=True, slots=True)
class SimHost:
    name: str
    key: str
    ip: str
    paths: tuple[str, ...]
    links: dict[str, tuple[str, ...]]     # path -> absolute URLs it links to
    disallow: tuple[str, ...]
    crawl_delay_s: float | None
    faults: HostFaults

    def robots_txt(self, token: str) -> bytes:
        lines = [f"User-agent: {token}"]
        lines += [f"Disallow: {d}" for d in self.disallow]
        if self.crawl_delay_s is not None:
            lines.append(f"Crawl-delay: {self.crawl_delay_s:g}")
        return ("\n".join(lines) + "\n").encode()


@dataclass(frozen=True, slots=True)
class RuntimeWeb:
    seed: int
    hosts: tuple[SimHost, ...]
    seeds: tuple[str, ...]
    leap_at_s: float | None = None        # virtual seconds after the start
    leap_s: float = 0.0
    restart_at_s: float | None = None     # the crawl is stopped then, and resumed from its store
    restart_aborts: bool = False          # ... by a second Ctrl-C: the requests in flight are cut
    intent: str = "archive"               # "search": pages change, the crawl recrawls them
    store_down_at_s: float | None = None  # the crawl's store fails every call from then (sim/rtfaults) ...
    store_down_s: float = 0.0             # ... for this long
    store_error: str = "locked"           # ... as a locked database or a full disk does
    freeze_at_s: float | None = None      # the crawler's process stalls (no callback runs) ...
    freeze_s: float = 0.0                 # ... this long ...
    freeze_in: str = "commit"             # ... inside its first store commit or fetch answer from then
    by_name: dict[str, SimHost] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_name.update({h.name: h for h in self.hosts})

    def describe(self) -> str:
        """One line per host: what the seed drew (printed for a failing seed)."""
        out = [f"  intent {self.intent}"]
        for h in self.hosts:
            f = h.faults
            bits = [f"robots={f.robots}", f"latency={f.latency_s:g}s"]
            if f.burst_len:
                bits.append(f"burst={f.burst_status}x{f.burst_len}@{f.burst_at}"
                            + (f" retry-after={f.retry_after_s}" if f.retry_after_s is not None else ""))
            bits += [name for name, on in (("refused", f.refused), ("dns-failure", f.dns)) if on]
            if h.crawl_delay_s is not None:
                bits.append(f"crawl-delay={h.crawl_delay_s:g}")
            out.append(f"  {h.name} ({h.ip}, {len(h.paths)} pages): {' '.join(bits)}")
        if self.leap_at_s is not None:
            out.append(f"  clock leaps {self.leap_s:g} s at +{self.leap_at_s:g} s")
        if self.restart_at_s is not None:
            how = "aborted (requests in flight cut)" if self.restart_aborts else "stopped"
            out.append(f"  the crawl is {how} at +{self.restart_at_s:g} s and resumed")
        if self.store_down_at_s is not None:
            out.append(f"  the store fails ({self.store_error}) from +{self.store_down_at_s:g} s "
                       f"for {self.store_down_s:g} s")
        if self.freeze_at_s is not None:
            out.append(f"  the crawler freezes {self.freeze_s:g} s in a {self.freeze_in} from +{self.freeze_at_s:g} s")
        return "\n".join(out)


class Request(NamedTuple):
    """One request as the server saw it (instants on the crawler's clock)."""

    url: str
    host: str
    path: str
    ip: str
    sent_at: float
    done_at: float
    status: int
    retry_after: str


def _faults(r: random.Random, share: float) -> HostFaults:
    latency = r.choice((0.01, 0.05, 0.2, 0.5))
    if r.random() < 0.1:
        latency = r.choice((2.0, 5.0, 9.0))    # a dripping host
    robots = r.choice(ROBOTS_MODES)
    if r.random() >= share:
        return HostFaults(latency_s=latency, robots=robots)
    kind = r.choice(("burst", "burst", "burst", "refused", "dns"))
    if kind == "refused":
        return HostFaults(latency_s=latency, refused=True, robots=robots)
    if kind == "dns":
        return HostFaults(latency_s=latency, dns=True, robots=robots)
    status = r.choice(BURST_STATUSES)
    retry = r.choice((None, 1, 5, 30)) if status != 500 else None
    return HostFaults(latency_s=latency, burst_at=r.randrange(0, 4), burst_len=r.randint(1, 4),
                      burst_status=status, retry_after_s=retry, robots=robots)


DEFAULT_SIZE = WebSize()


def draw_web(seed: int, size: WebSize = DEFAULT_SIZE) -> RuntimeWeb:
    """The web of `seed` (a pure function of its arguments)."""
    r = random.Random(seed)
    n_keys = r.randint(size.keys_min, size.keys_max)
    ips = [f"203.0.113.{10 + i}" for i in range(n_keys)]
    drafts = []
    for k in range(n_keys):
        key = f"k{k}.test"
        names = [key] + ([f"www.{key}"] if r.random() < 0.3 else [])
        crawl_delay = r.choice((None, None, None, 2.0, 5.0))
        for name in names:
            ip = ips[k] if r.random() < 0.7 else r.choice(ips)   # now and then a shared server
            paths = ("/",) + tuple(f"/p{j}" for j in range(r.randint(size.pages_min, size.pages_max) - 1))
            drafts.append((name, key, ip, paths, crawl_delay, _faults(r, size.fault_share)))
    if r.random() < size.shared_share:   # a shared server: many small sites behind one address
        for j in range(r.randint(size.shared_min, size.shared_max)):
            paths = ("/",) + tuple(f"/p{i}" for i in range(r.randint(1, 3)))
            drafts.append((f"s{j}.test", f"s{j}.test", SHARED_IP, paths, None,
                           HostFaults(latency_s=r.choice((0.01, 0.2, 1.0, 3.0)))))
    all_urls = [f"http://{d[0]}{p}" for d in drafts for p in d[3]]
    hosts = []
    for name, key, ip, paths, crawl_delay, faults in drafts:
        links = {}
        for p in paths:
            out = [f"http://{name}{r.choice(paths)}" for _ in range(r.randint(1, 4))]
            if r.random() < 0.3:
                out.append(r.choice(all_urls))              # another host
            if r.random() < 0.2:
                out.append(f"http://{name}/private/{r.randrange(100)}")   # disallowed
            links[p] = tuple(out)
        hosts.append(SimHost(name, key, ip, paths, links, ("/private/",), crawl_delay, faults))
    seeds = tuple(f"http://{h.name}/" for h in hosts if h.name == h.key)
    leap_at = r.uniform(5.0, 120.0) if r.random() < 0.2 else None
    leap_s = r.choice((30.0, 600.0, 4000.0)) if leap_at else 0.0
    restart_at = r.uniform(1.0, 60.0) if r.random() < 0.3 else None
    aborts = r.random() < 0.5
    intent = "search" if r.random() < 0.25 else "archive"
    # drawn last: the webs and faults drawn above stay those of their seed
    down_at = r.uniform(0.5, 20.0) if r.random() < 0.25 else None   # early: the crawl is busiest then
    if down_at is not None and restart_at is not None:
        down_at += restart_at   # the resumed run's load is not the fault drawn (a store down at start is exit 4)
    down_s = r.choice(STORE_DOWN_S) if down_at is not None else 0.0
    store_error = r.choice(("locked", "full"))
    freeze_at = r.uniform(1.0, 90.0) if r.random() < 0.2 else None
    freeze_s, freeze_in = (r.choice((2.0, 30.0, 400.0)), r.choice(("commit", "fetch"))) if freeze_at else (0.0, "commit")
    return RuntimeWeb(seed, tuple(hosts), seeds, leap_at, leap_s, restart_at, aborts, intent,
                      store_down_at_s=down_at, store_down_s=down_s, store_error=store_error,
                      freeze_at_s=freeze_at, freeze_s=freeze_s, freeze_in=freeze_in)


def _page(host: SimHost, path: str) -> bytes:
    items = "".join(f'<li><a href="{u}">{u}</a></li>' for u in host.links[path])
    return (f"<!doctype html><html><head><title>{host.name}{path}</title></head>"
            f"<body><p>Page {path} of {host.name}.</p><ul>{items}</ul></body></html>").encode()


class SimFetcher:
    """Answers from a `RuntimeWeb` after its latency; `log` holds every request."""

    def __init__(self, web: RuntimeWeb, clock, token: str, freeze=None) -> None:
        self.web = web
        self.clock = clock
        self.token = token
        self.log: list[Request] = []
        self._count: dict[str, int] = {}    # host -> page requests so far
        self.started_at = clock.now()
        self.validators: dict[str, tuple[str, str]] = {}   # If-None-Match of the request being answered
        self.freeze = freeze   # sim/rtfaults.Freeze: a stall drawn for a fetch answer

    async def fetch(self, url: str, *, ip: str | None = None, headers=None) -> FetchResult:
        parts = urlsplit(url)
        host = self.web.by_name[parts.hostname or ""]
        path = parts.path or "/"
        f = host.faults
        sent = self.clock.now()
        # per URL and attempt: the draw depends on nothing the scheduler decides
        n = self._count.get(host.name, 0)
        r = random.Random(f"{self.web.seed}:{url}:{n}")
        try:
            await asyncio.sleep(0.02 if f.refused else r.lognormvariate(0.0, 0.5) * f.latency_s)
        except asyncio.CancelledError:   # the crawl was aborted: the server saw the request all the same
            self.log.append(Request(url, host.name, path, ip or "", sent, self.clock.now(), ABORTED, ""))
            raise
        etag = next((v for k, v in (headers or {}).items() if k.lower() == "if-none-match"), None)
        self.validators = {etag: (host.name, path)} if etag else {}
        status, head, body, error = self._answer(host, path, f, n)
        done = self.clock.now()
        self.log.append(Request(url, host.name, path, ip or "", sent, done, status, head.get("retry-after", "")))
        if self.freeze is not None:
            self.freeze("fetch")   # the answer arrived; the process stalls before it handles it
        return FetchResult(url=url, ip=ip or "", status=status, request_head=b"GET " + path.encode() + b"\r\n\r\n",
                           response_head=b"HTTP/1.1 %d\r\n\r\n" % status if status else b"", headers=head,
                           body=body, content=body, truncated=None, started_at=sent, elapsed_s=done - sent,
                           error=error, error_detail="simulated" if error else "")

    def _answer(self, host: SimHost, path: str, f: HostFaults, n: int) -> tuple[int, dict, bytes, str | None]:
        if f.refused:
            return 0, {}, b"", "connect"
        if path == "/robots.txt":
            if f.robots == "unreachable":
                return 0, {}, b"", "connect"
            if f.robots == "5xx":
                return 503, {}, b"", None
            if f.robots == "none":
                return 404, {"content-type": "text/html"}, b"not found", None
            return 200, {"content-type": "text/plain"}, host.robots_txt(self.token), None
        self._count[host.name] = n + 1
        if f.burst_at <= n < f.burst_at + f.burst_len:
            head = {"retry-after": str(f.retry_after_s)} if f.retry_after_s is not None else {}
            return f.burst_status, head, b"busy", None
        if path not in host.links:
            return 404, {"content-type": "text/html"}, b"<html><body>not found</body></html>", None
        head = {"content-type": "text/html; charset=utf-8"}
        if self.web.intent == "search":   # the page changes every CHANGE_S: a version in its ETag and body
            version = int((self.clock.now() - self.started_at) // CHANGE_S)
            head["etag"] = f'"v{version}"'
            if self.validators.get(head["etag"]) == (host.name, path):
                return 304, head, b"", None
            return 200, head, _page(host, path) + f"<!-- v{version} -->".encode(), None
        return 200, head, _page(host, path), None

    async def close(self) -> None:
        pass


class SimResolver:
    def __init__(self, web: RuntimeWeb) -> None:
        self.web = web

    async def resolve(self, host: str) -> list[str]:
        h = self.web.by_name.get(host)
        if h is None or h.faults.dns:
            raise ResolveFailed(Reason.DNS, f"{host}: no such name (simulated)")
        return [h.ip]


class SimExtractor:
    """The real link extraction (shell/extract_worker.process_task), in this process."""

    def __init__(self, token: str, links_max: int, fingerprints: bool) -> None:
        self.options = (token, links_max, fingerprints)

    async def submit(self, body: bytes, url: str, content_type: str = "", x_robots_tag: str = "",
                     *, error_print: bool = True):
        return decode_page(process_task(body, url, content_type, x_robots_tag, error_print, self.options))

    async def close(self) -> None:
        pass


class _Record(NamedTuple):
    filename: str
    offset: int
    record_id: str


class SimWarc:
    """Counts records; writes nothing (the WARC writer has its own tests)."""

    def __init__(self) -> None:
        self.records = 0

    def _record(self) -> _Record:
        self.records += 1
        return _Record("sim.warc.gz", self.records, f"<urn:sim:{self.records}>")

    def write_exchange(self, **_: object) -> _Record:
        return self._record()

    def write_revisit(self, **_: object) -> _Record:
        return self._record()

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass
