"""core/change: content not bytes (masking, filters, noise learning, diff)."""

import pytest

from courtly.core.change import (
    MASK, NoiseBook, WatchRuleError, compare, compile_rules, content_of, diff_blocks, fingerprint, mask, observe,
    skeleton,
)


def page(main: str, extra: str = "") -> bytes:
    return (f"<html><body><nav><a href=/>Home</a> menu</nav><main>{main}</main>"
            f"<div class='sidebar'>{extra}</div><footer>footer text</footer></body></html>").encode()


def test_content_is_main_blocks_without_navigation_or_footer():
    blocks = content_of(page("<h1>Title</h1><p>First paragraph here.</p><ul><li>One</li><li>Two</li></ul>",
                             "Sidebar stuff"), "text/html")
    assert blocks == ["Title", "First paragraph here.", "One", "Two"]


@pytest.mark.parametrize("text", [
    "Updated 2026-12-01T21:45:03Z", "Updated 01/12/2026", "Updated Dec 1, 2026", "Updated 1 December 2026",
    "Updated at 21:45:03 UTC", "Updated 5 minutes ago", "1,234 views", "Visitors: 98765",
    "Session 2699682e4772cd9de7818217f2af4a9a", "See /a.pdf?cb=12345",
])
def test_volatile_text_is_masked(text):
    assert "Updated" not in text or MASK in mask(text)
    assert MASK in mask(text) or mask(text) == ""


def test_prices_and_plain_numbers_are_not_masked():
    assert mask("Price: $19.99 including tax") == "Price: $19.99 including tax"
    assert mask("In stock: 12 units") == "In stock: 12 units"


def test_ad_slot_text_is_dropped_whole():
    assert mask("Advertisement: blue kettle half price") == ""


def test_exclude_and_select_selectors_narrow_the_content():
    body = page("<p id=a>Alpha text</p><p class=b>Beta text</p><div class=c><p>Gamma text</p></div>")
    assert content_of(body, "text/html", compile_rules(exclude=["p.b"])) == ["Alpha text", "Gamma text"]
    assert content_of(body, "text/html", compile_rules(select=[".c"])) == ["Gamma text"]


def test_ignore_regex_masks_matching_text():
    rules = compile_rules(ignore=[r"build \w+"])
    assert mask("Version 2 build abc", rules) == f"Version 2 {MASK}"


@pytest.mark.parametrize("kw", [{"select": ["p["]}, {"ignore": ["(unclosed"]}, {"trigger_on": "sometimes"}])
def test_bad_filters_raise_watch_rule_error(kw):
    with pytest.raises(WatchRuleError):
        compile_rules(**kw)


def test_reordered_blocks_have_the_same_fingerprint():
    assert fingerprint(["a", "b", "c"]) == fingerprint(["c", "a", "b"])
    assert fingerprint(["a", "b"]) != fingerprint(["a", "b", "b"])


def test_diff_names_added_removed_and_changed_values():
    d = diff_blocks(["Title", "Price: $19.99 including tax", "Old line of text"],
                    ["Title", "Price: $17.50 including tax", "Old line of text", "Item 4: new thing"])
    assert d["changed"] == [{"before": "$19.99", "after": "$17.50", "context": "Price:",
                             "before_value": 19.99, "after_value": 17.5}]
    assert d["added"] == ["Item 4: new thing"]
    assert d["removed"] == []


def test_diff_of_a_text_edit_names_the_words():
    d = diff_blocks(["We open on Monday."], ["We open on Tuesday."])
    assert d == {"added": ["Tuesday."], "removed": ["Monday."], "changed": []}


def test_skeleton_keeps_shared_prefix_and_suffix():
    assert skeleton("Quote of the day: Small is beautiful.", "Quote of the day: Less is more.") == "Quote of the day: *"
    assert skeleton("12 left in stock", "7 left in stock") == "* left in stock"
    assert skeleton("entirely different words", "nothing shared here") is None


def test_noise_is_learned_after_repeated_changes_and_then_masked():
    book = NoiseBook()
    rules = compile_rules()
    quotes = ["Small is beautiful.", "Less is more.", "Readability counts.", "Flat beats nested.", "Now."]
    obs = [observe(["Title", f"Quote of the moment: {q}"], rules, book) for q in quotes[:1]]
    learned = []
    for q in quotes[1:4]:
        cur = observe(["Title", f"Quote of the moment: {q}"], rules, book)
        learned += book.observe(list(obs[-1].blocks), list(cur.blocks))
        obs.append(cur)
    assert learned == ["Quote of the moment: *"]
    a = observe(["Title", "Quote of the moment: Now."], rules, book)
    b = observe(["Title", "Quote of the moment: Later."], rules, book)
    assert a.fingerprint == b.fingerprint


def test_a_block_that_changed_once_is_not_learned():
    book = NoiseBook()
    before = ["Title", "Price: $10 each"]
    after = ["Title", "Price: $12 each"]
    assert book.observe(before, after) == []
    for _ in range(5):
        assert book.observe(after, after) == []
    assert book.learned == []


def test_trigger_reports_only_when_the_text_appears():
    rules = compile_rules(trigger="in stock")
    book = NoiseBook()
    a = observe(["Blue kettle", "Sold out"], rules, book)
    b = observe(["Blue kettle", "Sold out soon"], rules, book)
    c = observe(["Blue kettle", "Now in stock"], rules, book)
    assert not compare(a, b, rules).changed
    assert compare(b, c, rules).changed
    assert not compare(c, observe(["Blue kettle", "Now in stock!"], rules, book), rules).changed


def test_hostile_nesting_still_gives_its_text():
    assert content_of(b"<html><body>" + b"<div>" * 20000 + b"<p>deep text here</p>", "text/html") == ["deep text here"]


def test_a_watch_can_keep_a_generic_mask_off():
    rules = compile_rules(keep=["date"])
    assert mask("Next meeting: 2026-12-15", rules) == "Next meeting: 2026-12-15"
    assert MASK in mask("Next meeting: 2026-12-15")
    with pytest.raises(WatchRuleError, match="no mask named"):
        compile_rules(keep=["dates"])


@pytest.mark.parametrize("text", ["Ad hoc committee meets on the first Monday", "Sponsored by the city council"])
def test_text_that_merely_starts_like_an_ad_is_kept(text):
    assert mask(text) == text
