"""sim/spa.py: single-page-app hosts, opt-in, whose links exist only after their script runs."""

from __future__ import annotations

import json

from courtly.core.render_policy import ShellTest
from courtly.sim import spa
from courtly.sim.model import SimWeb
from courtly.sim.webconfig import profile_config

PORT = 8123


def _web(n: int) -> SimWeb:
    return SimWeb(profile_config("demo", hosts=12, seed=5, spa_hosts=n))


def test_spa_hosts_are_opt_in_and_leave_the_other_hosts_as_they_were():
    plain, with_spa = _web(0), _web(5)
    assert not [s for s in plain.hosts if s.has("spa")]
    apps = [s for s in with_spa.hosts if s.has("spa")]
    assert len(apps) == 5 and all(s.robots == "rules" for s in apps)
    assert sorted({spa.spa_variant(with_spa, s) for s in apps}) == sorted(spa.SPA_VARIANTS)
    for a, b in zip(plain.hosts, with_spa.hosts):
        if not b.has("spa"):
            assert (a.behaviours, a.robots, a.ip) == (b.behaviours, b.robots, b.ip)


def test_the_shell_has_no_links_and_passes_the_shell_test():
    web = _web(5)
    for s in (s for s in web.hosts if s.has("spa")):
        status, ctype, body, _tag = spa.serve(web, s, "/", PORT)
        assert status == 200 and "html" in ctype
        assert b"<a " not in body and ShellTest().judge(body) is not None


def test_the_script_and_api_carry_exactly_the_home_links():
    web = _web(5)
    by = {spa.spa_variant(web, s): s for s in web.hosts if s.has("spa")}
    hrefs = spa.home_hrefs(web, by["api"], PORT)
    assert json.loads(spa.serve(web, by["api"], "/spa/api/links.json", PORT)[2]) == hrefs
    parts = [json.loads(spa.serve(web, by["burst"], f"/spa/api/part-{i}.json", PORT)[2]) for i in range(spa.PARTS)]
    assert sorted(h for p in parts for h in p) == sorted(spa.home_hrefs(web, by["burst"], PORT))
    timer_js = spa.serve(web, by["timer"], "/spa/app.js", PORT)[2].decode()
    assert "setTimeout" in timer_js and json.dumps(spa.home_hrefs(web, by["timer"], PORT)) in timer_js
    assert spa.serve(web, by["loop"], "/spa/app.js", PORT) is None   # its only script is inline, endless
    guarded = spa.serve(web, by["guarded"], "/spa/app.js", PORT)[2].decode()
    assert "intranet.test" in guarded and spa.FORBIDDEN_PATHS[0] in guarded


def test_the_forbidden_path_is_disallowed_by_the_hosts_robots_txt():
    web = _web(5)
    for s in (s for s in web.hosts if s.has("spa")):
        assert not web.allowed(s.name, spa.FORBIDDEN_PATHS[0])


def test_no_other_host_links_to_an_apps_pages():
    web = _web(5)
    apps = {s.name for s in web.hosts if s.has("spa")}
    for s in web.hosts:
        lay = web.layout(s.name)
        for k in range(lay.first_article, lay.n_pages):
            for href, _t, _n in lay.links(k, "", PORT).links:
                if href.startswith(("http://", "//")):
                    host = href.split("//", 1)[1].split(":")[0].split("/")[0]
                    assert host == s.name or host not in apps, (s.name, href)
