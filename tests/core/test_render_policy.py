"""core/render_policy: the shell test and the render budget."""

from __future__ import annotations

import pytest

from courtly.config import ConfigError, config_from_dict
from courtly.core.render_policy import RenderBudget, RenderChoice, RenderPolicy, ShellSign, ShellTest

REACT_SHELL = (b'<!doctype html><html><head><title>App</title><script src="/static/main.js"></script>'
               b'</head><body><div id="root"></div></body></html>')
NEXT_SHELL = b'<html><body><div id="__next"><script>self.__next_f=[]</script></div></body></html>'
ANGULAR_SHELL = b"<html><body><app-root></app-root><script src=/main.js></script></body></html>"
NOSCRIPT_SHELL = (b"<html><body><noscript>You need to enable JavaScript to run this app.</noscript>"
                  b'<div id="mount"></div></body></html>')
SCRIPT_HEAVY = b"<html><body><p>Hi</p><script>" + b"var a=1;" * 400 + b"</script></body></html>"
ARTICLE = (b"<html><body><div id=\"root\"><h1>News</h1><p>" + b"Plenty of words in this article. " * 40
           + b'</p><a href="/next">next</a></div><script src="/a.js"></script></body></html>')
PLAIN = b"<html><body><p>A short page</p><a href='/b'>b</a></body></html>"


@pytest.mark.parametrize("html, sign", [
    (REACT_SHELL, ShellSign.ROOT),
    (NEXT_SHELL, ShellSign.ROOT),
    (ANGULAR_SHELL, ShellSign.ROOT),
    (NOSCRIPT_SHELL, ShellSign.NOSCRIPT),
    (SCRIPT_HEAVY, ShellSign.SCRIPTS),
])
def test_shell_test_finds_each_sign_of_a_script_shell(html, sign):
    assert ShellTest().judge(html) is sign


@pytest.mark.parametrize("html", [ARTICLE, PLAIN, b"", b"<div id=\"root\">Server-rendered text</div>"])
def test_shell_test_leaves_pages_with_their_text_or_no_scripts_alone(html):
    assert ShellTest().judge(html) is None


def test_shell_test_roots_are_configuration():
    html = b'<html><body><div id="mount"></div><script src="/x.js"></script></body></html>'
    assert ShellTest(roots=('id="mount"',), script_share_min=1.1).judge(html) is ShellSign.ROOT
    assert ShellTest(roots=(), script_share_min=1.1).judge(html) is None


def test_shell_test_reads_a_bounded_prefix_of_a_huge_body():
    html = b"<html><body>" + b"<p>words words words</p>" * 20_000 + b'<div id="root"></div>'
    assert ShellTest().judge(html) is None   # the marker past the scan is not seen, text is


def test_budget_allows_share_of_fetches_plus_burst_per_key():
    budget = RenderBudget(share_max=0.1, burst=1)
    allowed = 0
    for _ in range(30):
        budget.fetched("a.example")
        if budget.room("a.example") is RenderChoice.RENDER:
            budget.rendered("a.example")
            allowed += 1
    assert allowed == 4    # 0.1 x 30 + 1
    assert budget.room("a.example") is RenderChoice.BUDGET_KEY


def test_budget_over_the_crawl_binds_when_each_key_still_has_room():
    budget = RenderBudget(share_max=0.05, burst=1)
    choices = []
    for i in range(10):
        key = f"h{i}.example"
        budget.fetched(key)
        choice = budget.room(key)
        if choice is RenderChoice.RENDER:
            budget.rendered(key)
        choices.append(choice)
    assert choices[0] is RenderChoice.RENDER
    assert set(choices[1:]) == {RenderChoice.BUDGET_CRAWL}
    assert budget.used == pytest.approx(0.1)


def test_budget_forgets_oldest_keys_past_its_limit():
    budget = RenderBudget(share_max=0.0, burst=1, keys_max=2)
    for key in ("a", "b", "c"):
        budget.fetched(key)
        budget.rendered(key)
    assert len(budget._keys) == 2


def _policy(**kw) -> RenderPolicy:
    return RenderPolicy(ShellTest(), RenderBudget(kw.pop("share_max", 1.0), kw.pop("burst", 1)),
                        band_max=kw.pop("band_max", 4), enabled=kw.pop("enabled", True))


def test_policy_asks_type_then_switch_then_shell_then_band_then_budget():
    assert _policy().decide("k", 1, "application/json", REACT_SHELL)[0] is RenderChoice.NOT_HTML
    assert _policy(enabled=False).decide("k", 1, "text/html", REACT_SHELL)[0] is RenderChoice.OFF
    assert _policy().decide("k", 1, "text/html", PLAIN)[0] is RenderChoice.NOT_SHELL
    assert _policy(band_max=3).decide("k", 4, "text/html", REACT_SHELL) == (RenderChoice.BAND, ShellSign.ROOT)
    assert _policy().decide("k", 4, "text/html", REACT_SHELL) == (RenderChoice.RENDER, ShellSign.ROOT)


def test_policy_flags_the_shell_it_parses_raw_for_want_of_budget():
    policy = _policy(share_max=0.0, burst=1)
    first, _ = policy.decide("k", 1, "text/html", REACT_SHELL)
    second, _ = policy.decide("k", 1, "text/html", REACT_SHELL)
    assert first is RenderChoice.RENDER
    assert second is RenderChoice.BUDGET_KEY and second.budget_ran_out
    assert policy.budget.total.fetches == 2 and policy.budget.total.renders == 1


def test_render_config_defaults_and_refusals():
    cfg = config_from_dict({})
    assert cfg.render.enabled is False and cfg.render.share_max == 0.05
    assert cfg.render.executable_path == "/usr/bin/chromium"
    with pytest.raises(ConfigError, match="share_max"):
        config_from_dict({"render": {"share_max": 1.5}})
    with pytest.raises(ConfigError, match="navigation_s"):
        config_from_dict({"render": {"navigation_s": 30.0, "deadline_s": 20.0}})
    with pytest.raises(ConfigError, match="unknown key render.bogus"):
        config_from_dict({"render": {"bogus": 1}})


def test_a_render_given_back_frees_its_share():
    budget = RenderBudget(share_max=0.0, burst=1)
    budget.fetched("k")
    budget.rendered("k")
    assert budget.room("k") is RenderChoice.BUDGET_KEY
    budget.returned("k")
    assert budget.room("k") is RenderChoice.RENDER and budget.used == 0.0
