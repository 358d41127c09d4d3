"""An independent, deliberately small RFC 9309 matcher for the checkers.

The checkers must not trust the crawler's own robots code, so this file
re-implements just enough of RFC 9309 to judge a request log:

- parse at most `ROBOTS_BYTES_MAX` (500 KiB) bytes; a UTF-8 BOM is skipped,
  invalid UTF-8 is replaced (garbage then yields no rules);
- groups start with one or more `user-agent` lines; rules outside a group
  are ignored; every group naming the product token (case-insensitive,
  version suffix ignored) is merged, else every `*` group, else allow all;
- a rule matches when its pattern (with `*` = any run, trailing `$` = end)
  matches a prefix of path+query; the longest matching pattern wins and
  Allow wins a tie; an empty Disallow is no rule; /robots.txt is always
  allowed;
- `crawl-delay` (an extension) is read from the chosen groups.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["RobotsRules", "ROBOTS_BYTES_MAX", "robots_allows"]

ROBOTS_BYTES_MAX = 500 * 1024


@dataclass(slots=True)
class _Group:
    agents: list[str] = field(default_factory=list)
    rules: list[tuple[bool, str]] = field(default_factory=list)  # (allow, pattern)
    crawl_delay_s: float | None = None


@dataclass(frozen=True, slots=True)
class RobotsRules:
    """The rules that apply to one product token, ready to match paths."""

    rules: tuple[tuple[bool, str], ...]
    crawl_delay_s: float | None
    sitemaps: tuple[str, ...]

    @classmethod
    def allow_all(cls) -> "RobotsRules":
        return cls((), None, ())

    @classmethod
    def disallow_all(cls) -> "RobotsRules":
        return cls(((False, "/"),), None, ())

    @classmethod
    def parse(cls, body: bytes | str, token: str = "courtly") -> "RobotsRules":
        if isinstance(body, str):
            body = body.encode("utf-8")
        text = body[:ROBOTS_BYTES_MAX].decode("utf-8", errors="replace")
        text = text.removeprefix("\ufeff")
        groups, sitemaps = _parse_groups(text)
        token = token.lower()
        chosen = [g for g in groups if token in g.agents]
        if not chosen:
            chosen = [g for g in groups if "*" in g.agents]
        rules = tuple(r for g in chosen for r in g.rules)
        delays = [g.crawl_delay_s for g in chosen if g.crawl_delay_s is not None]
        return cls(rules, max(delays) if delays else None, tuple(sitemaps))

    def allowed(self, path: str) -> bool:
        """True when `path` (path plus query, starting with /) may be fetched."""
        if path == "/robots.txt" or path.startswith("/robots.txt?"):
            return True
        best_len = -1
        best_allow = True
        for allow, pattern in self.rules:
            if _matches(pattern, path):
                n = len(pattern.encode("utf-8"))
                if n > best_len or (n == best_len and allow):
                    best_len, best_allow = n, allow
        return best_allow


def _agent_token(value: str) -> str:
    value = value.strip().lower()
    if value == "*":
        return value
    return re.split(r"[/\s]", value, maxsplit=1)[0]


def _parse_groups(text: str) -> tuple[list[_Group], list[str]]:
    groups: list[_Group] = []
    sitemaps: list[str] = []
    current: _Group | None = None
    in_agents = False
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if ":" not in line:
            continue
        key, value = line.split(":", 1)
        key, value = key.strip().lower(), value.strip()
        if key in ("user-agent", "useragent", "user agent"):
            if current is None or not in_agents:
                current = _Group()
                groups.append(current)
            current.agents.append(_agent_token(value))
            in_agents = True
            continue
        if key == "sitemap":
            sitemaps.append(value)
            continue
        if current is None:
            continue
        in_agents = False
        if key in ("allow", "disallow"):
            if value:
                current.rules.append((key == "allow", value))
        elif key == "crawl-delay":
            try:
                current.crawl_delay_s = float(value)
            except ValueError:
                pass
    return groups, sitemaps


_PATTERN_CACHE: dict[str, re.Pattern[str]] = {}


def _matches(pattern: str, path: str) -> bool:
    rx = _PATTERN_CACHE.get(pattern)
    if rx is None:
        anchored = pattern.endswith("$")
        body = pattern[:-1] if anchored else pattern
        rx_text = ".*".join(re.escape(part) for part in body.split("*"))
        rx = re.compile(rx_text + ("$" if anchored else ""), re.DOTALL)
        if len(_PATTERN_CACHE) < 10_000:
            _PATTERN_CACHE[pattern] = rx
    return rx.match(path) is not None


def robots_allows(body: bytes | str, path: str, token: str = "courtly") -> bool:
    """One-shot helper: does robots.txt `body` allow `path` for `token`?"""
    return RobotsRules.parse(body, token).allowed(path)
