"""Tests for courtly.core.soft404: learning each host's "not found" page."""

from __future__ import annotations

import json
import random

import pytest

from courtly.core.fingerprint import simhash64
from courtly.core.soft404 import PROBE_PREFIX, Soft404Book, error_fingerprint

ORIGIN = "http://shop.test"
ERROR_TEMPLATE = ("Oops! Page not found. Sorry, {path} does not exist (anymore). "
                  "Try the home page or search our catalogue.")
ARTICLE = ("The harbour master counted forty boats leaving before dawn, more than any spring "
           "in memory, and the fishermen said the warm current brought the sardines back early.")


def error_page(url: str) -> int:
    path = url.split("://", 1)[1].split("/", 1)[1]
    return error_fingerprint(ERROR_TEMPLATE.format(path="/" + path), url)


def test_probe_url_is_random_from_the_injected_generator_and_cannot_exist():
    book = Soft404Book()
    a = book.probe_url(ORIGIN, random.Random(1))
    b = book.probe_url(ORIGIN + "/", random.Random(1))
    c = book.probe_url(ORIGIN, random.Random(2))
    assert a == b != c
    assert a.startswith(ORIGIN + PROBE_PREFIX) and len(a) == len(ORIGIN + PROBE_PREFIX) + 16


def test_unknown_host_needs_a_probe_and_is_never_soft():
    book = Soft404Book()
    assert book.needs_probe(ORIGIN)
    assert not book.is_soft(ORIGIN)
    assert not book.is_soft404(ORIGIN, 0)


def test_a_200_probe_makes_the_error_template_recognisable_at_other_paths():
    book = Soft404Book()
    probe = book.probe_url(ORIGIN, random.Random(7))
    book.record_probe(ORIGIN, 200, error_page(probe), now=100.0)
    assert not book.needs_probe(ORIGIN)
    assert book.is_soft(ORIGIN)
    assert book.is_soft404(ORIGIN, error_page(ORIGIN + "/news/missing-13.html"))
    assert book.is_soft404(ORIGIN, error_page(ORIGIN + "/a/very/different/path?q=1"))
    assert not book.is_soft404(ORIGIN, error_fingerprint(ARTICLE, ORIGIN + "/news/boats.html"))
    assert not book.is_soft404("http://other.test", error_page(probe))


def test_removing_the_url_is_what_makes_short_error_pages_match():
    """Without it the echoed path moves a 20-word page's SimHash by ~10-20 bits."""
    a, b = "/courtly-404-probe-0123456789abcdef", "/news/missing-13.html"
    raw_a, raw_b = (simhash64(ERROR_TEMPLATE.format(path=p)) for p in (a, b))
    assert bin(raw_a ^ raw_b).count("1") > 6
    assert error_fingerprint(ERROR_TEMPLATE.format(path=a), ORIGIN + a) == \
        error_fingerprint(ERROR_TEMPLATE.format(path=b), ORIGIN + b)


@pytest.mark.parametrize("status", [404, 410])
def test_a_404_probe_means_the_host_is_honest(status):
    book = Soft404Book()
    book.record_probe(ORIGIN, status, None)
    assert not book.needs_probe(ORIGIN)
    assert not book.is_soft(ORIGIN)
    assert not book.is_soft404(ORIGIN, error_page(ORIGIN + "/x"))


@pytest.mark.parametrize("status", [0, 301, 403, 500, 503])
def test_inconclusive_probes_are_retried_a_bounded_number_of_times(status):
    book = Soft404Book(attempts_max=3)
    for _ in range(2):
        book.record_probe(ORIGIN, status, None)
        assert book.needs_probe(ORIGIN)
    book.record_probe(ORIGIN, status, None)
    assert not book.needs_probe(ORIGIN)  # gave up: treated as honest
    assert not book.is_soft(ORIGIN)


def test_a_200_without_fingerprint_is_inconclusive():
    book = Soft404Book()
    book.record_probe(ORIGIN, 200, None)
    assert book.needs_probe(ORIGIN) and not book.is_soft(ORIGIN)


def test_probes_expire_after_their_ttl_when_now_is_given():
    book = Soft404Book(probe_ttl_s=1000.0)
    book.record_probe(ORIGIN, 404, None, now=5000.0)
    assert not book.needs_probe(ORIGIN, now=5999.0)
    assert book.needs_probe(ORIGIN, now=6000.0)
    book.record_probe(ORIGIN, 200, error_page(ORIGIN + "/p"), now=6000.0)  # the host changed its mind
    assert book.is_soft(ORIGIN)


def test_signatures_are_bounded_newest_kept():
    book = Soft404Book(signatures_max=2)
    fps = [random.Random(i).getrandbits(64) for i in range(3)]
    for fp in fps:
        book.record_probe(ORIGIN, 200, fp)
    assert not book.is_soft404(ORIGIN, fps[0])
    assert book.is_soft404(ORIGIN, fps[1]) and book.is_soft404(ORIGIN, fps[2])


def test_threshold_is_distance_max_bits():
    book = Soft404Book(distance_max=6)
    book.record_probe(ORIGIN, 200, 0)
    assert book.is_soft404(ORIGIN, 0b111111)
    assert not book.is_soft404(ORIGIN, 0b1111111)


def test_snapshot_restores_through_json():
    book = Soft404Book()
    book.record_probe(ORIGIN, 200, (1 << 64) - 1, now=1.0)
    book.record_probe("http://honest.test", 404, None, now=2.0)
    book.record_probe("http://flaky.test", 503, None, now=3.0)
    restored = Soft404Book.restore(json.loads(json.dumps(book.snapshot())))
    assert restored.snapshot() == book.snapshot()
    assert restored.is_soft404(ORIGIN, (1 << 64) - 1)
    assert not restored.needs_probe("http://honest.test")
    assert restored.needs_probe("http://flaky.test")
    with pytest.raises(ValueError):
        Soft404Book.restore({"version": 99, "hosts": {}})


def test_the_first_page_of_an_unsettled_origin_may_go_before_the_probe():
    book = Soft404Book(probe_ttl_s=1000.0)
    assert book.defer_probe(ORIGIN)          # once
    assert not book.defer_probe(ORIGIN)      # the second page waits for the probe
    assert book.needs_probe(ORIGIN)
    book.record_probe("http://settled.test", 404, None, now=10.0)
    assert not book.defer_probe("http://settled.test")
    assert not book.defer_probe("http://settled.test")   # expired: probed before its next page
    assert book.needs_probe("http://settled.test", now=1010.0)


@pytest.mark.parametrize("before", ["nothing", "deferred", "gave up"])
def test_a_real_not_found_settles_an_origin_as_honest(before):
    book = Soft404Book(attempts_max=1)
    if before == "deferred":
        book.defer_probe(ORIGIN)
    elif before == "gave up":
        book.record_probe(ORIGIN, 503, None)
    book.note_not_found(ORIGIN, now=7.0)
    assert not book.needs_probe(ORIGIN) and not book.is_soft(ORIGIN)
    assert book.snapshot()["hosts"][ORIGIN][:3] == ["honest", 0, 7.0]


def test_a_real_not_found_does_not_undo_a_soft_probe():
    book = Soft404Book()
    book.record_probe(ORIGIN, 200, error_page(ORIGIN + "/p"))
    book.note_not_found(ORIGIN)   # a site may 404 some paths and soft-404 others
    assert book.is_soft(ORIGIN) and book.is_soft404(ORIGIN, error_page(ORIGIN + "/other"))


def test_the_deferral_survives_a_snapshot_and_old_snapshots_load():
    book = Soft404Book()
    book.defer_probe(ORIGIN)
    restored = Soft404Book.restore(json.loads(json.dumps(book.snapshot())))
    assert not restored.defer_probe(ORIGIN) and restored.needs_probe(ORIGIN)
    old = {"version": 1, "hosts": {ORIGIN: ["unknown", 1, 0.0, []], "http://h.test": ["honest", 0, 2.0, []]}}
    loaded = Soft404Book.restore(old)
    assert loaded.defer_probe(ORIGIN) and not loaded.needs_probe("http://h.test")


def test_origins_are_bounded():
    book = Soft404Book(origins_max=2)
    for i in range(3):
        book.record_probe(f"http://h{i}.test", 404, None)
    assert book.needs_probe("http://h0.test") and not book.needs_probe("http://h2.test")


def test_sim_soft404_template_is_detected_and_articles_are_not():
    """The simulated web's own soft-404 host, rendered in-process."""
    from courtly.core.maintext import main_text
    from courtly.sim.model import SimWeb
    from courtly.sim.page import render_page, render_soft404
    from courtly.sim.webconfig import profile_config

    web = SimWeb(profile_config("hostile", pages_per_host=40))
    spec = next(s for s in web.hosts if s.has("soft404"))
    lay = web.layout(spec.name)
    origin = f"http://{spec.name}:8080"
    book = Soft404Book()
    probe = book.probe_url(origin, random.Random(3))
    probe_path = probe[len(origin):]
    book.record_probe(origin, 200, error_fingerprint(main_text(render_soft404(lay, probe_path)), probe))
    for k in lay.articles:
        path = lay.path_of(k)
        missing = path.replace(".html", "-gone.html")
        fp_missing = error_fingerprint(main_text(render_soft404(lay, missing)), origin + missing)
        assert book.is_soft404(origin, fp_missing), missing
        fp_page = error_fingerprint(main_text(render_page(lay, k, "", 0, 8080)), origin + path)
        assert not book.is_soft404(origin, fp_page), path
