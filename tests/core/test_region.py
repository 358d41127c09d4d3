"""core/region: home regions from probes, the partition layout, routing, residency."""

from __future__ import annotations

import pytest

from courtly.core.region import (HomeReason, Probe, RegionError, RegionLayout, Route, check_mix, choose_home,
                                 route)

REGIONS = ("us", "eu")


def _probes(region: str, rtt: float | None, status: int = 200, digest: str = "d", n: int = 3) -> list[Probe]:
    return [Probe(region, rtt, status if rtt is not None else 0, digest if rtt is not None else "")
            for _ in range(n)]


def test_the_region_with_the_lowest_median_rtt_is_home():
    choice = choose_home(_probes("us", 0.250) + _probes("eu", 0.020), REGIONS, default="us")
    assert (choice.region, choice.reason) == ("eu", HomeReason.RTT)
    assert choice.rtt_s == {"us": 0.250, "eu": 0.020}


def test_a_host_that_refuses_one_region_is_homed_in_the_region_it_serves_however_slow():
    choice = choose_home(_probes("us", 0.010, status=451) + _probes("eu", 0.300), REGIONS, default="us")
    assert (choice.region, choice.reason, choice.blocked) == ("eu", HomeReason.GEO_BLOCK, ("us",))


def test_a_host_that_does_not_answer_one_region_at_all_is_geo_blocked_there():
    choice = choose_home(_probes("us", None) + _probes("eu", 0.300), REGIONS, default="us", current="us")
    assert (choice.region, choice.blocked) == ("eu", ("us",))


def test_different_content_per_region_is_flagged_as_regional_variants():
    choice = choose_home(_probes("us", 0.1, digest="a") + _probes("eu", 0.2, digest="b"), REGIONS, default="us")
    assert choice.variants and choice.region == "us"
    same = choose_home(_probes("us", 0.1, digest="a") + _probes("eu", 0.2, digest="a"), REGIONS, default="us")
    assert not same.variants


def test_the_current_home_stays_unless_another_region_is_faster_by_the_margin():
    probes = _probes("us", 0.110) + _probes("eu", 0.100)
    assert choose_home(probes, REGIONS, default="us", current="us").reason is HomeReason.KEPT
    faster = _probes("us", 0.200) + _probes("eu", 0.100)
    assert choose_home(faster, REGIONS, default="us", current="us").region == "eu"


def test_too_few_probes_leave_the_key_where_it_is_and_an_override_always_wins():
    few = _probes("us", 0.3, n=2) + _probes("eu", 0.01)
    assert choose_home(few, REGIONS, default="us").reason is HomeReason.DEFAULT
    forced = choose_home(_probes("us", 0.3) + _probes("eu", 0.01), REGIONS, default="us", override="us")
    assert (forced.region, forced.reason) == ("us", HomeReason.OVERRIDE)
    with pytest.raises(RegionError, match="unknown region 'ap'"):
        choose_home([], REGIONS, default="us", override="ap")


def test_each_region_owns_a_contiguous_share_of_the_partitions_and_keys_stay_in_their_homes_range():
    layout = RegionLayout(("us", "eu", "ap"), 1024)
    ranges = [layout.range_of(r) for r in layout.regions]
    assert [p for r in ranges for p in r] == list(range(1024))
    assert max(map(len, ranges)) - min(map(len, ranges)) <= 1
    for i in range(200):
        key = f"site{i}.test"
        for home in layout.regions:
            p = layout.partition_of(key, home)
            assert layout.region_of_partition(p) == home
    assert layout.partition_of("a.test", "eu") == layout.partition_of("a.test", "eu")


def test_a_layout_needs_a_partition_per_region_and_distinct_names():
    with pytest.raises(RegionError):
        RegionLayout(("us", "eu"), 1)
    with pytest.raises(RegionError):
        RegionLayout(("us", "us"), 8)
    with pytest.raises(RegionError):
        RegionLayout(("us",), 8).range_of("eu")


def test_a_link_homed_elsewhere_is_forwarded_not_fetched():
    assert route("eu", "eu") is Route.FETCH
    assert route("eu", "us") is Route.FORWARD


def test_an_export_refuses_to_mix_regions_unless_told():
    assert check_mix(["eu", "eu"]) == {"eu"}
    with pytest.raises(RegionError, match="mix regions eu, us"):
        check_mix(["eu", "us"])
    assert check_mix(["eu", "us"], allow_mixed=True) == {"eu", "us"}


def test_a_404_answer_serves_a_region_and_a_5xx_does_not():
    # robots.txt probes: a host without robots.txt answers 404, which is an answer
    choice = choose_home(_probes("us", 0.010, status=451) + _probes("eu", 0.300, status=404), REGIONS,
                         default="us")
    assert (choice.region, choice.reason) == ("eu", HomeReason.GEO_BLOCK)
    choice = choose_home(_probes("us", 0.010, status=503) + _probes("eu", 0.300, status=503), REGIONS,
                         default="us")
    assert choice.reason is HomeReason.DEFAULT
