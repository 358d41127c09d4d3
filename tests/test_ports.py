"""The ports' values: where they are declared, the kinds the fetcher reports, the rows the store reads back."""

from __future__ import annotations

import asyncio
import gzip

import pytest

from courtly import ports
from courtly.core.health import FailureKind, failure_kind
from courtly.core.purge import purge_of
from courtly.ports import (
    Batch, ComplaintRow, DeadLetterRow, DigestRow, FetchError, FlagRow, HistoryRow, NewUrlRow, PurgeRow,
    QueuedRow, RefusedRow, SimhashRow,
)
from courtly.shell.decode import decode_body
from courtly.shell.store.sqlite import SqliteStore


def test_the_shell_re_exports_the_values_declared_in_ports():
    from courtly.shell import fetcher, resolver

    assert fetcher.FetchResult is ports.FetchResult
    assert resolver.ResolveFailed is ports.ResolveFailed


@pytest.mark.parametrize("kind", [FailureKind.CONNECT, FailureKind.RESET, FailureKind.TIMEOUT, FailureKind.TLS])
def test_each_network_failure_health_counts_is_a_fetch_error(kind):
    assert failure_kind(0, FetchError(kind.value)) is kind


def test_a_fetch_error_is_its_string_in_comparisons_and_sets():
    assert FetchError.TIMEOUT == "timeout" and "timeout" in {FetchError.TIMEOUT}
    assert f"{FetchError.DECODE_BOMB}" == "decode_bomb"


def test_the_decoder_reports_fetch_error_members():
    def decode(body: bytes, coding: str):
        return decode_body(body, coding, decoded_bytes_max=1000, ratio_max=1000.0)

    assert decode(b"not gzip at all", "gzip").error is FetchError.DECODE
    assert decode(b"x", "x-unknown").error is FetchError.DECODE
    assert decode(gzip.compress(bytes(5000)), "gzip").error is FetchError.DECODE_BOMB
    assert decode(gzip.compress(b"fine"), "gzip").error is None


def _stored(tmp_path) -> SqliteStore:
    store = SqliteStore(tmp_path / "crawl.db")
    b = Batch()
    b.new_urls.append(NewUrlRow("http://a.test/", "a.test", 1, 0, 0, "", 10.0))
    b.new_urls.append(NewUrlRow("http://a.test/x", "a.test", 4, 1, 0, "http://a.test/", 11.0))
    b.decisions.append(ports.DecisionRow("http://b.test/", "b.test", "", 12.0, ports.UrlState.SKIPPED,
                                         "robots", "Disallow: /", 0))
    b.dead_letters.append(DeadLetterRow("http://a.test/dead", 13.0, "extraction killed"))
    b.flags.append(FlagRow("http://a.test/x", 14.0, "exact_dup", "http://a.test/"))
    b.digests.append(DigestRow("sha1:AAAA", "http://a.test/", 15.0, "<urn:uuid:1>"))
    b.simhashes.append(SimhashRow("http://a.test/", -5, "a.test"))
    b.histories["http://a.test/"] = HistoryRow("http://a.test/", "a.test", 1, 0, "{}")
    store.apply(b)
    return store


def test_the_store_reads_its_rows_back_as_named_tuples(tmp_path):
    store = _stored(tmp_path)
    try:
        queued = list(store.iter_queued())
        assert [type(r) for r in queued] == [QueuedRow, QueuedRow]
        assert {(r.url, r.band, r.via, r.attempts) for r in queued} == {
            ("http://a.test/", 1, "", 0), ("http://a.test/x", 4, "http://a.test/", 0)}
        assert [r.url for r in store.queued_of_key("a.test", 10)] == ["http://a.test/", "http://a.test/x"]
        assert store.dead_letters(5) == [DeadLetterRow("http://a.test/dead", 13.0, "extraction killed")]
        assert list(store.iter_flags(("exact_dup",))) == [FlagRow("http://a.test/x", 14.0, "exact_dup",
                                                                  "http://a.test/")]
        assert [d.record_id for d in store.iter_digests()] == ["<urn:uuid:1>"]
        assert [s.fp for s in store.iter_simhashes()] == [-5]
        assert [h.history for h in store.iter_histories()] == ["{}"]
        assert store.refused_at_depth0(["robots"], 5) == [RefusedRow("http://b.test/", "b.test", "", "robots",
                                                                     "Disallow: /")]
    finally:
        store.close()


def test_purges_and_complaints_come_back_as_named_tuples(tmp_path):
    store = _stored(tmp_path)
    try:
        stored, counts = store.add_purge(purge_of("url_prefix", "http://a.test/x"), 20.0)
        assert counts == {"queued": 1, "other": 0}
        (row,) = store.purges()
        assert type(row) is PurgeRow and (row.id, row.value, row.at, row.applied_at) == (
            stored.id, "http://a.test/x", 20.0, None)
        cid = store.add_complaint("a.test", "a.test", "ops@a.test", "too fast", 21.0)
        (c,) = store.complaints(open_only=True)
        assert type(c) is ComplaintRow and (c.id, c.note, c.resolved_at) == (cid, "too fast", None)
    finally:
        store.close()


def test_a_plain_tuple_batch_row_is_still_written(tmp_path):
    # the runtime appends tuples of the same fields until it builds the rows itself
    store = SqliteStore(tmp_path / "crawl.db")
    try:
        b = Batch()
        b.new_urls.append(("http://c.test/", "c.test", 1, 0, 0, "", 1.0))
        store.apply(b)
        assert store.has_url("http://c.test/")
    finally:
        store.close()


def test_the_http1_exchange_reports_truncation_and_errors_as_port_members():
    from courtly.shell.http1 import Exchange

    def closed_after(data: bytes) -> Exchange:
        loop = asyncio.new_event_loop()
        try:
            x = Exchange(loop, 1 << 20, 1 << 16, 100)
            x.feed(data)
            x.lost(None)   # the peer closes
            return x
        finally:
            loop.close()

    cut = closed_after(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345")
    assert cut.truncated is ports.Truncation.DISCONNECT and cut.error is None
    assert closed_after(b"HTTP/1.1 200 OK\r\nContent-").error is FetchError.RESET
    assert closed_after(b"SSH-2.0-OpenSSH\r\n\r\n").error is FetchError.PROTOCOL
