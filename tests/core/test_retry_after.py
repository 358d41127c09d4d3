"""Retry-After parsing (RFC 9110 10.2.3): delta-seconds and the three HTTP
date forms, read into an instant; garbage is None. Pure: every call gets `now`."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from courtly.core.politeness import parse_retry_after

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(
    "value, expected",
    [
        ("120", 1120.0),
        ("  7 ", 1007.0),
        ("0", 1000.0),
        (None, None),
        ("", None),
        ("   ", None),
        ("-5", None),
        ("1.5", None),
        ("1e3", None),
        ("0x10", None),
        ("soon", None),
        ("²", None),        # Unicode digit: str.isdigit() is true but it is not delta-seconds
        ("١٢", None),       # Arabic-Indic digits are not RFC 9110 DIGITs either
        ("Mon, 32 Jan 2024 00:00:00 GMT", None),
        ("Fri, 31 Dec 99999 23:59:59 GMT", None),
    ],
)
def test_parse_retry_after_cases(value, expected):
    assert parse_retry_after(value, 1000.0) == expected


def test_parse_retry_after_http_date_forms():
    when = datetime(2024, 5, 1, 12, 5, 0, tzinfo=timezone.utc).timestamp()
    assert when == T0 + 300
    assert parse_retry_after("Wed, 01 May 2024 12:05:00 GMT", T0) == when        # IMF-fixdate
    assert parse_retry_after("Wednesday, 01-May-24 12:05:00 GMT", T0) == when    # obsolete RFC 850
    assert parse_retry_after("Wed, 01 May 2024 14:05:00 +0200", T0) == when
    # a date in the past means "now", never earlier
    assert parse_retry_after("Wed, 01 May 2024 11:00:00 GMT", T0) == T0


def test_parse_retry_after_accepts_asctime_dates():
    # RFC 9110 5.6.7: recipients must accept asctime dates; GMT is implied
    assert parse_retry_after("Wed May  1 12:05:00 2024", T0) == T0 + 300


def test_parse_retry_after_huge_delta_is_far_future_not_an_error():
    assert parse_retry_after("9" * 40, 0.0) >= 1e39
