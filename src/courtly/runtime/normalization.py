"""The URL normalisation rules a crawl folder was made with, kept and checked.

Every URL record, queued URL and seen test keys on the normalised string, so
a crawl resumed under other rules would key its URLs anew: pages fetched
twice, URLs admitted again under a second spelling, purges and explanations
that miss. A crawl therefore records its rules in the store's meta
(`normalization`: `NORMALIZATION_VERSION` and every field of
`NormalizeRules` that the config sets) when it first loads, and a resume
whose rules differ is refused before anything is written, with one line
naming what changed. A folder from before this record gets it at its next
load (its rules are unknown, so they are taken as the current ones).

Rules: no shell imports; the error is a ConfigError (one line, exit 2).
"""

from __future__ import annotations

import dataclasses
import json

from courtly.config import Config, ConfigError
from courtly.core.urls import NormalizeRules

__all__ = ["RulesChanged", "rules_of", "rules_record", "check_rules", "rules_meta", "META_KEY"]

META_KEY = "normalization"


class RulesChanged(ConfigError):
    """The crawl folder was made under other normalisation rules."""


def rules_of(cfg: Config) -> NormalizeRules:
    """The crawl's rules: the built-in ones with the `[urls]` keys added."""
    base = NormalizeRules()
    u = cfg.urls
    return NormalizeRules(
        strip_params=base.strip_params | frozenset(p.lower() for p in u.strip_params),
        order_sensitive_hosts=frozenset(h.lower() for h in u.order_sensitive_hosts),
        keep_params_hosts=frozenset(h.lower() for h in u.keep_params_hosts),
        length_max=u.length_max,
    )


def rules_record(rules: NormalizeRules) -> dict:
    """The rules as JSON-ready values: sets sorted, tuples as lists."""
    out = {}
    for f in dataclasses.fields(rules):
        v = getattr(rules, f.name)
        out[f.name] = sorted(v) if isinstance(v, frozenset) else list(v) if isinstance(v, tuple) else v
    return out


def check_rules(stored: str | None, rules: NormalizeRules) -> str | None:
    """The meta value to write (None: already recorded and equal). Raises
    RulesChanged when `stored` names other rules."""
    now = rules_record(rules)
    if stored is None:
        return json.dumps(now, sort_keys=True)
    try:
        then = json.loads(stored)
    except ValueError:
        raise RulesChanged("the crawl folder's recorded normalisation rules are unreadable (meta "
                           f"{META_KEY!r}); resume refused") from None
    changes = [_change(name, then.get(name), now.get(name)) for name in sorted(set(then) | set(now))
               if then.get(name) != now.get(name)]
    if not changes:
        return None
    return _refuse(changes)


def rules_meta(stored: str | None, cfg: Config) -> dict[str, str]:
    """The store meta to write for a crawl under `cfg` whose recorded rules
    are `stored` ({} when recorded and equal); raises RulesChanged."""
    record = check_rules(stored, rules_of(cfg))
    return {} if record is None else {META_KEY: record}


def _refuse(changes: list[str]) -> str:
    raise RulesChanged(
        "this crawl folder's URLs were normalised under other rules (" + "; ".join(changes) + "): resuming "
        "would key them anew; resume with the rules it was made with, or crawl into a new --out")


def _change(name: str, then, now) -> str:
    if name == "version":
        return f"NORMALIZATION_VERSION {then} -> {now}"
    label = {"strip_params": "urls.strip_params", "order_sensitive_hosts": "urls.order_sensitive_hosts",
             "keep_params_hosts": "urls.keep_params_hosts", "length_max": "urls.length_max"}.get(name, name)
    if isinstance(then, list) and isinstance(now, list):
        added, gone = sorted(set(now) - set(then)), sorted(set(then) - set(now))
        parts = ([f"+{', +'.join(added)}"] if added else []) + ([f"-{', -'.join(gone)}"] if gone else [])
        return f"{label} {' '.join(parts) or 'reordered'}"
    return f"{label} {then} -> {now}"
