"""BanWatch (core/ban.py): a 403 wave or one challenge body for many URLs
pauses a key; a single answer of the same kind keeps it paused; any other
answer ends the pause. Pure."""

from __future__ import annotations

import pytest

from courtly.core.ban import BAN_403, BAN_CHALLENGE, BanConfig, BanWatch, body_fingerprint

PAGE = b"<html>" + b"x" * 200 + b"</html>"
CHALLENGE = b"<html><title>Just a moment...</title>" + b"c" * 500 + b"</html>"


def page(i: int) -> bytes:
    return b"<html>page %d " % i + b"y" * 300 + b"</html>"


def test_ten_403s_in_a_row_are_a_ban_and_nine_are_not():
    w = BanWatch()
    for i in range(9):
        assert w.answered("k", f"u{i}", 403, b"") == ""
    assert w.answered("k", "u9", 403, b"") == BAN_403


def test_any_other_answer_ends_the_403_run():
    w = BanWatch()
    for i in range(30):
        status = 200 if i % 9 == 8 else 403
        assert w.answered("k", f"u{i}", status, page(i)) == ""


def test_one_challenge_body_for_ten_different_urls_is_a_ban():
    w = BanWatch()
    assert [w.answered("k", f"https://k/p{i}", 200, page(i)) for i in range(2)] == ["", ""]   # the site itself
    got = [w.answered("k", f"https://k/{i}", 200, CHALLENGE) for i in range(10)]
    assert got == [""] * 9 + [BAN_CHALLENGE]


def test_the_same_url_answered_the_same_again_is_no_challenge():
    w = BanWatch()
    assert all(w.answered("k", "https://k/same", 200, CHALLENGE) == "" for _ in range(30))


@pytest.mark.parametrize("body", [b"", b"ok", b"x" * 63])
def test_empty_and_tiny_bodies_for_many_urls_are_no_challenge(body):
    w = BanWatch()
    assert all(w.answered("k", f"https://k/{i}", 200, body) == "" for i in range(30))


def test_404_pages_alike_are_no_challenge():
    w = BanWatch()
    assert all(w.answered("k", f"https://k/{i}", 404, CHALLENGE) == "" for i in range(30))


def test_different_pages_are_no_challenge_and_keys_are_separate():
    w = BanWatch()
    for i in range(30):
        assert w.answered("a", f"https://a/{i}", 200, page(i)) == ""
        assert w.answered("b", f"https://b/{i}", 200, CHALLENGE if i < 5 else page(i)) == ""


def test_while_paused_one_answer_of_the_same_kind_keeps_the_ban_and_another_ends_it():
    w = BanWatch(BanConfig(run_same_body=3, early_bodies=0))
    for i in range(3):
        w.answered("k", f"https://k/{i}", 200, CHALLENGE)
    assert w.paused_on("k") == BAN_CHALLENGE
    assert w.answered("k", "https://k/probe1", 200, CHALLENGE) == BAN_CHALLENGE
    assert w.answered("k", "https://k/probe2", 403, b"") == ""     # another answer: the pause is over
    assert w.paused_on("k") == ""


def test_the_fingerprint_sees_a_difference_at_either_end_and_in_the_length():
    base = body_fingerprint(CHALLENGE)
    assert body_fingerprint(b"X" + CHALLENGE[1:]) != base
    assert body_fingerprint(CHALLENGE[:-1] + b"X") != base
    assert body_fingerprint(CHALLENGE + b" ") != base
    assert body_fingerprint(bytes(CHALLENGE)) == base


def test_config_refuses_runs_shorter_than_two():
    with pytest.raises(ValueError):
        BanConfig(run_403=1)


def test_a_single_page_app_serving_one_shell_for_every_url_is_not_a_challenge():
    # the same 200 body for every URL from the first answer on is the site itself
    from courtly.core.ban import BanWatch

    watch = BanWatch()
    shell = b"<!doctype html><div id=root></div><script src=/app.js></script>" + b" " * 64
    sitemap = b"<?xml version='1.0'?><urlset>" + b"<url><loc>https://spa.example/a</loc></url>" * 3 + b"</urlset>"
    answers = [watch.answered("spa.example", "https://spa.example/sitemap.xml", 200, sitemap)]
    answers += [watch.answered("spa.example", f"https://spa.example/{i}", 200, shell) for i in range(50)]
    assert set(answers) == {""}


def test_a_site_that_turns_into_one_body_after_its_first_pages_is_a_challenge():
    from courtly.core.ban import BAN_CHALLENGE, BanWatch

    watch = BanWatch()
    pages = [watch.answered("k", f"https://k.example/{i}", 200, f"page {i} ".encode() * 20) for i in range(3)]
    wall = b"<html>Checking your browser before accessing the site...</html>" * 2
    bans = [watch.answered("k", f"https://k.example/w{i}", 200, wall) for i in range(10)]
    assert set(pages) == {""} and bans[-1] == BAN_CHALLENGE and set(bans[:-1]) == {""}
