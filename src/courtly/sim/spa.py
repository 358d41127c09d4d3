"""Single-page-app hosts of the simulated web: links that exist only after a script runs.

A host with the `spa` behaviour (`SimWebConfig.spa_hosts` of them, taken
from the plain hosts; none by default) answers `/` with a script shell: an
empty `<div id="root">`, a `<noscript>` asking for JavaScript and one script,
`/spa/app.js`. The home page's links (the model's `links(0)`, so the
reachability walk and the rendered page agree) appear only when that script
runs. The SPA hosts take turns at the variants:

    api        the script fetches /spa/api/links.json and writes the links
    timer      the links are in the script, written 200 ms after load
    loop       an inline script that never ends (no links, ever)
    guarded    as api, and it also asks for an SSRF bait address and for
               /private/spa-secret.json, which robots.txt disallows (the host's
               robots variant is always `rules`): neither may ever be sent
    burst      eight parallel fetches of /spa/api/part-N.json, a slice of the
               links each: per-key politeness must still hold

Pure: `serve` maps a request to a reply from the model alone.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from courtly.sim.layout import bait_urls

if TYPE_CHECKING:
    from courtly.sim.model import HostSpec, SimWeb

__all__ = ["SPA_VARIANTS", "PARTS", "spa_variant", "serve", "home_hrefs", "FORBIDDEN_PATHS"]

SPA_VARIANTS = ("api", "timer", "loop", "guarded", "burst")
PARTS = 8
TIMER_MS = 200
FORBIDDEN_PATHS = ("/private/spa-secret.json",)   # robots-disallowed: a crawler never asks
_HTML = "text/html; charset=utf-8"
_JS = "application/javascript"
_JSON = "application/json"

_ADD = ("function add(hrefs){const root=document.getElementById('root');"
        "for(const h of hrefs){const a=document.createElement('a');a.href=h;a.textContent=h;root.appendChild(a);}}\n")


def spa_variant(web: "SimWeb", spec: "HostSpec") -> str:
    order = [s.index for s in web.hosts if s.has("spa")]
    return SPA_VARIANTS[order.index(spec.index) % len(SPA_VARIANTS)]


def home_hrefs(web: "SimWeb", spec: "HostSpec", port: int) -> list[str]:
    """The home page's hrefs, as the model writes them (rendering reveals these)."""
    return [href for href, _text, _nofollow in web.layout(spec.name).links(0, "", port).links]


def serve(web: "SimWeb", spec: "HostSpec", target: str, port: int) -> tuple[int, str, bytes, str] | None:
    """(status, content type, body, tag) for an SPA path of `spec`, or None (not one of them)."""
    variant = spa_variant(web, spec)
    tag = f"spa_{variant}"
    if target == "/":
        return 200, _HTML, _shell(spec.name, variant), tag
    if target == "/spa/app.js" and variant != "loop":
        return 200, _JS, _script(web, spec, variant, port).encode(), tag
    if target == "/spa/api/links.json" and variant in ("api", "guarded"):
        return 200, _JSON, json.dumps(home_hrefs(web, spec, port)).encode(), tag
    if target.startswith("/spa/api/part-") and target.endswith(".json") and variant == "burst":
        n = target[len("/spa/api/part-"):-len(".json")]
        if n.isdigit() and int(n) < PARTS:
            hrefs = home_hrefs(web, spec, port)[int(n)::PARTS]
            return 200, _JSON, json.dumps(hrefs).encode(), tag
    if target in FORBIDDEN_PATHS:
        return 200, _JSON, b'{"secret": true}', "spa_forbidden"
    return None


def _shell(name: str, variant: str) -> bytes:
    script = "<script>for(;;){}</script>" if variant == "loop" else '<script src="/spa/app.js"></script>'
    return (f"<!doctype html><html><head><title>{name}</title></head><body>"
            "<noscript>You need to enable JavaScript to run this app.</noscript>"
            f'<div id="root"></div>{script}</body></html>').encode()


def _script(web: "SimWeb", spec: "HostSpec", variant: str, port: int) -> str:
    fetch_links = "fetch('/spa/api/links.json').then(r=>r.json()).then(add);\n"
    if variant == "api":
        return _ADD + fetch_links
    if variant == "timer":
        return _ADD + f"setTimeout(()=>add({json.dumps(home_hrefs(web, spec, port))}),{TIMER_MS});\n"
    if variant == "guarded":
        bait = next(u for u in bait_urls(port) if "intranet.test" in u)
        return (_ADD + f"fetch({json.dumps(bait)}).catch(()=>0);\n"
                f"fetch({json.dumps(FORBIDDEN_PATHS[0])}).catch(()=>0);\n" + fetch_links)
    # burst
    return (_ADD + f"Promise.all([...Array({PARTS}).keys()].map(i=>fetch('/spa/api/part-'+i+'.json')"
            ".then(r=>r.json()))).then(parts=>parts.forEach(add));\n")
