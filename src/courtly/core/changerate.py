"""Change rates: what the fetches of a URL saw, and how fast it changes.

Theory of operation
-------------------
Every known URL has a `ChangeHistory`: what the last fetch saw (hash, ETag,
Last-Modified) and the last `history_max` revisit intervals, each with a
changed/unchanged flag; samples pushed out of that window are folded into
decaying counts (`older`). `observe` updates it from an answer (a 304, or a
body with the stored hash, is "unchanged"); `conditional_headers` gives the
If-None-Match / If-Modified-Since validators.

Change rate. Changes are a Poisson process of rate lambda, so a revisit after
an interval I sees a change with probability 1 - e^(-lambda I). `estimate_rate`
is the maximum-likelihood rate of Cho & Garcia-Molina ("Estimating frequency
of change", TOIT 2003) with pseudo-observations at the mean interval. With no
prior that is their half unchanged observation, giving for regular intervals
exactly their improved estimator
    lambda = -log((n - X + 0.5) / (n + 0.5)) / mean(I),
which is 0 for X = 0, finite for X = n and far less biased than -log(1 - X/n).
With a prior lambda0, the half observation is replaced by `prior_weight`
observations that changed with probability 1 - e^(-lambda0 mean(I)): the prior
weighs like m revisits of the page itself, dominates for a new URL, fades as
evidence comes, and settles X = n (which only says "at least ~log(2n)/I") on
the prior's side instead of saturating. Intervals more than a factor 2 apart
make the mean-interval form biased (1 - e^(-lambda I) is concave), so then a
few Newton steps in log lambda solve the likelihood equation
    sum_changed I/(e^(lambda I) - 1) = sum_unchanged I.
The prior is hierarchical (`PriorModel`): samples are pooled (binned by
interval, estimated as if one URL) by crawl, host, kind of URL across hosts
(`url_kind`: extension and query names), host and kind, and path template;
a young URL starts from the default shrunk toward each in turn.

What a rate implies. A page of rate lambda revisited every I is fresh for a
share F = (1 - e^(-lambda I)) / (lambda I) of the time; the revisit interval
that maximises importance-weighted freshness under a budget is
I = x*(mu lambda / w) / lambda, x* the root of 1 - (1 + x) e^(-x) = c
(`optimal_x`, tabulated once and interpolated; `revisit_interval`), and
`budget_multiplier` finds the mu at which a sample of URLs' revisit rates add
up to a fetch rate. Why that index, and the queue that keeps to the budget:
`courtly.core.recrawl`, which owns the policy, the queue and the plan.

Rules: pure; `now` is an argument; no randomness here. `observe`,
`PriorModel.observe` and `estimate_rate` run once per fetch: keep them lean
(the window and the pooled bins are flat arrays, not objects per value).
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from typing import Sequence

__all__ = [
    "DAY_S", "ChangeHistory", "conditional_headers", "observe", "estimate_rate", "solve_score",
    "path_template", "url_kind", "PriorModel", "optimal_x", "revisit_interval", "staleness_priority", "freshness_index",
    "budget_multiplier", "GONE", "is_gone",
]

DAY_S = 86400.0
_exp, _log, _log1p, _log2, _expm1 = math.exp, math.log, math.log1p, math.log2, math.expm1


# ---- history, conditional GET --------------------------------------------------

@dataclass(slots=True)
class ChangeHistory:
    """What the fetches of one URL saw. `intervals[i]` ended with `changed[i]`.

    The window is two compact arrays (seconds; 0/1), the newest last: a URL
    costs a few hundred bytes, not the kilobytes of two deques of floats
    (any sequence given is converted, keeping the newest `history_max`).
    Samples pushed out of the bounded window are not forgotten at once: they
    are folded into `older` = (samples, changed, sum of intervals), which
    decays with a half-life of `memory_s` (so a page whose rate drifts is
    relearned), and which the estimator reads as pseudo-observations."""

    history_max: int = 16
    memory_s: float = 30 * DAY_S
    last_fetched_at: float | None = None
    last_changed_at: float | None = None
    content_hash: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    capture: tuple[str, float] | None = None   # (url, fetched_at) of the WARC record the validators came from
    fetches: int = 0
    changes: int = 0
    failures: int = 0
    intervals: array[float] = field(default_factory=lambda: array("d"))
    changed: array[int] = field(default_factory=lambda: array("B"))
    older: tuple[float, float, float] = (0.0, 0.0, 0.0)
    older_at: float = 0.0

    def add_sample(self, now: float, interval: float, changed: bool) -> None:
        intervals = self.intervals
        if len(intervals) == self.history_max:
            n, x, total = self.older
            keep = 0.5 ** (max(0.0, now - self.older_at) / self.memory_s)
            self.older = (n * keep + 1.0, x * keep + self.changed[0], total * keep + intervals[0])
            self.older_at = now
            del intervals[0]
            del self.changed[0]
        intervals.append(interval)
        self.changed.append(changed)

    def __post_init__(self) -> None:
        intervals, changed = list(self.intervals), list(self.changed)
        self.intervals = array("d", intervals[max(0, len(intervals) - self.history_max):])
        self.changed = array("B", [bool(c) for c in changed[max(0, len(changed) - self.history_max):]])


def conditional_headers(history: ChangeHistory) -> dict[str, str]:
    """If-None-Match / If-Modified-Since validators from the last fetch (RFC 9110 13.1)."""
    headers = {}
    if history.etag:
        headers["If-None-Match"] = history.etag
    if history.last_modified:
        headers["If-Modified-Since"] = history.last_modified
    return headers


GONE = "gone:"   # content_hash of a 404/410 answer: "gone:404"


def observe(history: ChangeHistory, now: float, status: int, content_hash: str | None = None,
            etag: str | None = None, last_modified: str | None = None,
            capture: tuple[str, float] | None = None) -> bool:
    """Record a fetch answer; True when the content differs from what we held.

    `capture`: the WARC-Target-URI and fetched_at (WARC-Date) of the record
    that holds this answer's payload. Like the validators it is kept through
    304s: it is what a server-not-modified revisit refers to.

    304 is "unchanged". 2xx compares `content_hash`; 404/410 count as content
    ("gone"). Other statuses (5xx, 429, other 4xx, network errors as 0) carry
    no change information: a failure is counted and no sample is added. The
    first successful fetch returns True (new content) and adds no sample."""
    if status == 304:
        new_hash = history.content_hash
    elif 200 <= status < 300:
        new_hash = content_hash
    elif status in (404, 410):
        new_hash = f"{GONE}{status}"
    else:
        history.failures += 1
        return False
    prev_at = history.last_fetched_at
    changed = new_hash != history.content_hash or history.fetches == 0
    if prev_at is not None and history.fetches and now > prev_at:
        history.add_sample(now, now - prev_at, changed)
    if changed:
        history.changes += history.fetches > 0
        history.last_changed_at = now
    history.fetches += 1
    history.last_fetched_at = now
    history.content_hash = new_hash
    if status != 304 or etag:
        history.etag = etag
    if status != 304 or last_modified:
        history.last_modified = last_modified
    if status != 304:
        history.capture = capture
    return changed


def is_gone(history: ChangeHistory) -> bool:
    """The last answer was 404 or 410: the URL holds no page whose changes a prior describes."""
    h = history.content_hash
    return h is not None and h.startswith(GONE)


# ---- the change-rate estimator ---------------------------------------------------

def estimate_rate(intervals: Sequence[float], changed: Sequence[int], *,
                  prior_rate: float | None = None, prior_weight: float = 0.0,
                  older: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> float:
    """Poisson change rate (per second) from revisits; see the module docstring.

    The maximum-likelihood rate of the sample plus pseudo-observations: older
    samples folded into `older` = (n, changed, sum of intervals), and at the
    sample's mean interval either half an unchanged one (no prior: Cho &
    Garcia-Molina's improved estimator, 0 when X = 0 and finite when X = n) or
    `prior_weight` of them that changed with the prior's probability
    1 - e^(-prior_rate mean). Closed form when the intervals are within a
    factor 2 of each other, Newton steps on the likelihood equation otherwise."""
    n = len(intervals)
    if len(changed) != n:
        raise ValueError("intervals and changed differ in length")
    o_n, o_x, o_total = older
    if n == 0 and o_n <= 0.0:
        return prior_rate if prior_rate is not None else 0.0
    total = sum(intervals)
    samples = n + o_n
    mean = (total + o_total) / samples
    x = sum(changed) + o_x
    if prior_rate and prior_weight > 0.0:
        stay0 = _exp(-prior_rate * mean)           # prior P(unchanged over a mean interval)
        x_extra, u_extra = prior_weight * (1.0 - stay0), prior_weight * stay0
    else:
        x_extra, u_extra = 0.0, 0.5
    unchanged_n = (samples - x) + u_extra
    if not unchanged_n > 1e-12:  # X = n and a prior so fast its unchanged share underflows
        assert prior_rate is not None  # without a prior, u_extra = 0.5 keeps unchanged_n >= 0.5
        return prior_rate + _log((samples + prior_weight) / prior_weight) / mean
    rate = _log((samples + x_extra + u_extra) / unchanged_n) / mean
    if not (0.0 < x + x_extra and rate > 0.0):
        return rate
    lo, hi = (min(intervals), max(intervals)) if n else (mean, mean)
    if o_n > 0.0:
        o_mean = o_total / o_n
        lo, hi = min(lo, o_mean), max(hi, o_mean)
    if not hi > 2.0 * lo:  # near-regular intervals: the closed form
        return rate
    ones = [i for i, c in zip(intervals, changed) if c]       # changed samples, weight 1
    unchanged_s = total - sum(ones) + u_extra * mean
    weighted = []
    if o_n > 0.0:
        weighted.append((o_mean, o_x))
        unchanged_s += (o_n - o_x) * o_total / o_n
    if x_extra > 0.0:
        weighted.append((mean, x_extra))
    if unchanged_s > 0.0:
        rate = _newton(ones, weighted, unchanged_s, 0.0, 0.0, rate)
    return rate


def solve_score(changed: Sequence[tuple[float, float]], unchanged_s: float, a: float, b: float,
                start: float) -> float:
    """Root in r of  sum_changed w I/(e^(rI) - 1) - unchanged_s + a/r - b = 0.

    The likelihood (plus a Gamma prior r^a e^(-br)) equation of revisits where
    `changed` holds (interval, weight) pairs that saw a change. Decreasing in
    r, so the root is unique; Newton steps in log r, capped, from `start`."""
    return _newton((), changed, unchanged_s, a, b, start)


def _newton(ones: Sequence[float], weighted: Sequence[tuple[float, float]], unchanged_s: float, a: float,
            b: float, start: float) -> float:
    """`solve_score` over the changed samples `ones` (weight 1, summed first) and `weighted`."""
    theta = _log(start)
    for _ in range(12):
        r = _exp(theta)
        s = a / r - b - unchanged_s
        d = -a / r
        for i in ones:
            ri = r * i
            q = 1.0 / _expm1(700.0 if ri > 700.0 else ri)
            s += i * q
            d -= ri * i * q * (1.0 + q)
        for i, w in weighted:
            ri = r * i
            q = 1.0 / _expm1(700.0 if ri > 700.0 else ri)
            s += w * i * q
            d -= w * r * i * i * q * (1.0 + q)
        if d == 0.0:
            break
        step = s / d
        step = 2.0 if step > 2.0 else -2.0 if step < -2.0 else step
        theta -= step
        if -1e-3 < step < 1e-3:  # 0.1 %: far below the estimate's own noise
            break
    return _exp(theta)


_DIGITS = frozenset("0123456789")


def path_template(url: str) -> str:
    """host + the first three path segments, any segment with a digit as '{n}'."""
    rest = url.partition("://")[2] or url
    for sep in "?#":
        rest = rest.partition(sep)[0]
    authority, _, path = rest.partition("/")
    host = authority.rpartition("@")[2].lower()
    if not host.startswith("["):
        host = host.partition(":")[0]
    segs = [s for s in path.split("/") if s][:3]
    shape = "/".join("{n}" if _DIGITS.intersection(s) else s for s in segs)
    return f"{host}/{shape}"


# ---- the prior -------------------------------------------------------------------

GROUP_OBS_MAX = 4096          # past this, a group's counts are halved (it forgets slowly)
_BINS = 48                    # bins allocated up front (to 2^24 s); a group grows past that if it must


class _Group:
    """Revisit samples pooled over the URLs of a host or template, binned by interval.

    Bin k (k = int(2 log2 interval)) holds (samples, changed, sum of intervals)
    at sums[3k:3k+3], a flat array (no objects per bin); `order` lists the
    bins in the order they were first filled, the order they are summed in."""

    __slots__ = ("n", "sums", "order", "rate", "log_rate", "stale")

    def __init__(self) -> None:
        self.n = 0.0
        self.sums = array("d", bytes(8 * 3 * _BINS))
        self.order: list[int] = []
        self.rate: float | None = None
        self.log_rate = 0.0
        self.stale = 0

    def halve(self) -> None:
        """Halve the counts (bins under one sample are dropped): the group forgets slowly."""
        sums, kept = self.sums, []
        for k in self.order:
            j = 3 * k
            cnt = sums[j]
            if cnt < 1.0:
                self.n -= cnt
                sums[j] = sums[j + 1] = sums[j + 2] = 0.0
            else:
                sums[j] = cnt * 0.5
                sums[j + 1] *= 0.5
                sums[j + 2] *= 0.5
                kept.append(k)
        self.order = kept
        self.n *= 0.5

    def refresh(self) -> None:
        """Re-estimate the group's rate as if it were one URL (Cho's estimator on the bins)."""
        self.stale = 0
        n = x = total = unchanged = 0.0
        changed = []
        sums = self.sums
        for k in self.order:
            j = 3 * k
            cnt, chg, tot = sums[j], sums[j + 1], sums[j + 2]
            n += cnt
            x += chg
            total += tot
            unchanged += (cnt - chg) * tot / cnt
            if chg:
                changed.append((tot / cnt, chg))
        mean = total / n
        if x == 0.0:
            self.rate = 0.5 / (total + mean)  # no change seen: half a change over the exposure
        else:
            start = -math.log1p(-x / (n + 0.5)) / mean
            self.rate = solve_score(changed, unchanged + 0.5 * mean, 0.0, 0.0, start)
        self.log_rate = math.log(max(self.rate, 1e-12))


_EXT_MAX = 8   # longer "extensions" are names with a dot in them, not a declared type


def url_kind(url: str) -> str:
    """What a URL declares it is, from any host: the last path segment's
    extension and the sorted query parameter names (``/files/r-6.pdf`` ->
    ``.pdf``, ``/a/b-2.html?print=1`` -> ``.html?print``, ``/news/`` -> ``/``)."""
    rest = (url.partition("://")[2] or url).partition("#")[0]
    rest, _, query = rest.partition("?")
    path = rest.partition("/")[2]
    last = path.rpartition("/")[2]
    if not last:
        kind = "/"
    else:
        ext = last.rpartition(".")[2].lower() if "." in last else ""
        kind = "." + ext if ext and len(ext) <= _EXT_MAX and ext.isalnum() else ""
    if query:
        kind += "?" + "&".join(sorted({q.partition("=")[0] for q in query.split("&") if q}))
    return kind


class PriorModel:
    """The prior rate of a URL: from the crawl's pooled rate, shrunk in turn to
    its host's, its kind's (`url_kind`, pooled over every host), its host's
    URLs of that kind, and its template's (host + path template + kind).

    A group counts once it holds `n_min` samples, with weight n / (n +
    `shrink`) in log rate. The kind sits below the host because what a URL
    is says more of how it changes than where it is: the PDF files of a host
    whose pages change every minute are not refetched at the pages' pace once
    PDF files anywhere have been seen not to change; the host-and-kind group
    below it brings the host's own pace back for its pages."""

    def __init__(self, default_rate: float, *, n_min: float = 8.0, shrink: float = 8.0) -> None:
        self.default_log = math.log(default_rate)
        self.n_min = n_min
        self.shrink = shrink
        self.crawl = _Group()
        self._groups: dict[str, _Group] = {}

    def groups(self, host: str, template: str, kind: str = "") -> tuple[_Group, ...]:
        """The groups a URL's samples are pooled into, from the widest (the crawl) in."""
        return (self.crawl, self._group("h:" + host), self._group("k:" + kind),
                self._group(f"hk:{host}|{kind}"), self._group(f"t:{template}|{kind}"))

    def _group(self, name: str) -> _Group:
        g = self._groups.get(name)
        if g is None:
            g = self._groups[name] = _Group()
        return g

    def observe(self, groups: tuple[_Group, ...], interval: float, changed: bool) -> float:
        """One revisit sample into each group (binned by int(2 log2 interval)); returns `rate(groups)`."""
        k = int(2.0 * _log2(interval)) if interval > 1.0 else 0
        log_r, n_min, shrink, n_max = self.default_log, self.n_min, self.shrink, GROUP_OBS_MAX
        j = 3 * k
        for g in groups:
            sums = g.sums
            if j >= len(sums):
                sums.frombytes(bytes(8 * (j + 3 - len(sums))))
            cnt = sums[j]
            if cnt == 0.0:  # a new bin (a bin in use holds at least half a sample)
                g.order.append(k)
            sums[j] = cnt + 1.0
            sums[j + 1] += changed
            sums[j + 2] += interval
            g.n = n = g.n + 1.0
            g.stale = stale = g.stale + 1
            if n > n_max:
                g.halve()
                n = g.n
            if n >= n_min:
                if g.rate is None or stale * 8 >= n:
                    g.refresh()
                log_r += n / (n + shrink) * (g.log_rate - log_r)
        return _exp(log_r)

    def rate(self, groups: tuple[_Group, ...]) -> float:
        """The prior: from the default, shrink toward each group in turn (weight n / (n + shrink))."""
        log_r, n_min, shrink = self.default_log, self.n_min, self.shrink
        for g in groups:
            n = g.n
            if n >= n_min:
                if g.rate is None or g.stale * 8 >= n:
                    g.refresh()
                log_r += n / (n + shrink) * (g.log_rate - log_r)
        return _exp(log_r)


# ---- revisit intervals and indexes ------------------------------------------------

_U_MIN, _U_MAX, _U_STEPS = -36.0, 36.0, 2880
_U_STEP = (_U_MAX - _U_MIN) / _U_STEPS
_LOGX: list[float] = []


def _x_exact(c: float) -> float:
    """Root of 1 - (1 + x) e^(-x) = c, 0 < c < 1, by Newton (log forms keep it conditioned)."""
    if c < 0.5:
        x = math.sqrt(2.0 * c)
        for _ in range(50):
            h = -math.expm1(-x) - x * math.exp(-x)
            step = (math.log(h) - math.log(c)) * h / (x * math.exp(-x))
            x = max(x - step, x / 4.0)
            if abs(step) <= 1e-14 * x:
                break
        return x
    target = math.log1p(-c)
    x = -target + math.log1p(-target)
    for _ in range(50):
        step = (math.log1p(x) - x - target) / (1.0 / (1.0 + x) - 1.0)
        x = max(x - step, 1e-3)
        if abs(step) <= 1e-14 * x:
            break
    return x


def _table() -> list[float]:
    if not _LOGX:
        for k in range(_U_STEPS + 1):
            u = _U_MIN + k * _U_STEP
            _LOGX.append(math.log(_x_exact(1.0 / (1.0 + math.exp(-u)))))
    return _LOGX


def optimal_x(c: float) -> float:
    """x*(c): the optimal revisit interval in units of 1/lambda (inf when c >= 1)."""
    if c <= 0.0:
        return 0.0
    if c >= 1.0:
        return math.inf
    u = _log(c) - _log1p(-c)
    if u <= _U_MIN:
        return math.sqrt(2.0 * c)
    if u >= _U_MAX:
        big = -_log1p(-c)
        return big + _log1p(big)
    t = (u - _U_MIN) / _U_STEP
    k = int(t)
    table = _LOGX or _table()
    return _exp(table[k] + (t - k) * (table[k + 1] - table[k]))


def revisit_interval(index: str, multiplier: float, rate: float, importance: float) -> float:
    """Interval after which a URL's index reaches `multiplier` (inf: never by the index)."""
    if index == "freshness":
        return optimal_x(multiplier * rate / importance) / rate
    q = multiplier / importance
    return math.inf if q >= 1.0 else -math.log1p(-q) / rate


def staleness_priority(importance: float, rate: float, age_s: float) -> float:
    """importance x P(changed since the last fetch)."""
    return importance * -math.expm1(-rate * age_s)


def freshness_index(importance: float, rate: float, age_s: float) -> float:
    """The Lagrangian index: importance / rate x (1 - (1 + rate age) e^(-rate age))."""
    x = rate * age_s
    return importance / rate * (-math.expm1(-x) - x * math.exp(-x))


def budget_multiplier(rows: Sequence[tuple[float, float, float, float]], rate_per_s: float, index: str,
                      start: float | None = None) -> float:
    """The multiplier at which the revisit rates of `rows` sum to `rate_per_s`.

    A row is (rate, importance, min interval, max interval); its revisit rate
    is 1 / revisit_interval(index, multiplier, ...) clamped to its bounds, so
    the sum decreases in the multiplier. A bracket is widened around `start`,
    then Illinois regula falsi in log multiplier; e^200 when the rate is 0."""

    def total(log_mult: float) -> float:
        mult, acc = math.exp(log_mult), 0.0
        for rate, imp, lo, hi in rows:
            iv = revisit_interval(index, mult, rate, imp)
            acc += 1.0 / (lo if iv < lo else hi if iv > hi else iv)
        return acc

    if rate_per_s <= 0.0:
        return math.exp(200.0)

    def gap(log_mult: float) -> float:
        return math.log(max(total(log_mult), 1e-300) / rate_per_s)

    centre = math.log(start) if start else 0.0
    a, b = centre - 1.0, centre + 1.0
    ga, gb = gap(a), gap(b)
    for _ in range(14):  # widen until the root is bracketed (or the budget is out of reach)
        if ga < 0.0 and a > -200.0:
            a, b, gb = max(-200.0, a - 2.0 * (b - a)), a, ga
            ga = gap(a)
        elif gb > 0.0 and b < 200.0:
            a, b, ga = b, min(200.0, b + 2.0 * (b - a)), gb
            gb = gap(b)
        else:
            break
    if ga <= 0.0:
        return math.exp(a)
    if gb >= 0.0:
        return math.exp(b)
    for _ in range(30):  # Illinois regula falsi: gap is smooth and decreasing
        c = b - gb * (b - a) / (gb - ga)
        gc = gap(c)
        if abs(gc) < 1e-3 or b - a < 1e-6:
            return math.exp(c)
        if gc > 0.0:
            a, ga = c, gc
            gb *= 0.5
        else:
            b, gb = c, gc
            ga *= 0.5
    return math.exp(0.5 * (a + b))
