"""What PostgresStore shares between workers beyond the store contract
(test_store_contract.py): a payload stored by one worker is found by
another; the trap guard's, soft-404 book's, near-duplicate and recrawl rows
are read back per partition (a worker taking one over); a worker writes the
trap rows of the partitions it holds only, fenced; purges are numbered in
the order they commit; a database of schema 3 upgrades with its rows kept.
"""

from __future__ import annotations

import asyncio
import json

import asyncpg
import pytest

from courtly.core.fingerprint import FirstCapture
from courtly.core.purge import purge_of
from courtly.core.urls import partition_of
from courtly.shell.store.postgres import COPY_ROWS_MIN, MIGRATIONS, PostgresStore, StaleEpoch, migrate
from courtly.shell.store.sqlite import Batch
from pg_store_support import ALL, P, _hold_all, _key_in_other_partition, _new, _open, run

KEY_A = "a.test"
KEY_B = _key_in_other_partition(KEY_A)
PART_A, PART_B = partition_of(KEY_A, P), partition_of(KEY_B, P)


def _trap_snapshot(*keys: str) -> str:
    return json.dumps({"version": 1, "allow": [], "hosts": {k: {"fetches": i + 1} for i, k in enumerate(keys)}})


def test_a_payload_stored_by_one_worker_is_found_by_another(postgres):
    dsn = postgres.create_database()

    async def body():
        a, b = await _open(dsn), await _open(dsn)
        try:
            epochs = await _hold_all(a, "worker-a")
            assert await b.digest_record("sha1:X") is None
            await a.apply(Batch(digests=[("sha1:X", "http://a.test/1", 5.0, "<urn:uuid:a>")]),
                          partition_epochs=epochs)
            # worker B, which never saw the page, finds the first capture: it writes a revisit
            assert await b.digest_record("sha1:X") == FirstCapture("http://a.test/1", 5.0, "<urn:uuid:a>")
            assert await b.digest_records(["sha1:X", "sha1:Y"]) == {
                "sha1:X": FirstCapture("http://a.test/1", 5.0, "<urn:uuid:a>")}
        finally:
            await a.close()
            await b.close()

    run(body())


def test_defence_and_recrawl_rows_are_read_back_per_partition(postgres):
    dsn = postgres.create_database()
    host_b = KEY_B   # a bare registered domain: its own politeness key

    async def body():
        s = await _open(dsn)
        try:
            epochs = await _hold_all(s)
            book = {"version": 2, "hosts": {"http://a.test": [1, 0, 1.0, [], False],
                                            f"https://{host_b}:8443": [2, 0, 2.0, ["00000000000000ff"], False]}}
            await s.apply(Batch(
                simhashes=[("http://a.test/1", 1, "a.test"), (f"http://{host_b}/1", 2, host_b),
                           ("http://www.a.test/2", 3, "www.a.test")],
                histories={"http://a.test/1": ("http://a.test/1", "a.test", 1, 0, "[]"),
                           f"http://{host_b}/1": (f"http://{host_b}/1", host_b, 1, 0, "[]")},
                meta={"traps": _trap_snapshot(KEY_A, KEY_B), "soft404": json.dumps(book)}),
                partition_epochs=epochs)
            assert [r[0] async for r in s.iter_simhashes([PART_A])] == ["http://a.test/1", "http://www.a.test/2"]
            assert [r[0] async for r in s.iter_simhashes([PART_B])] == [f"http://{host_b}/1"]
            assert [r[0] async for r in s.iter_histories([PART_B])] == [f"http://{host_b}/1"]
            assert len([r async for r in s.iter_histories(ALL)]) == 2
            assert list((await s.trap_snapshot([PART_A]))["hosts"]) == [KEY_A]
            assert list((await s.trap_snapshot([PART_B]))["hosts"]) == [KEY_B]
            assert list((await s.soft404_snapshot([PART_B]))["hosts"]) == [f"https://{host_b}:8443"]
            assert (await s.soft404_snapshot())["hosts"] == book["hosts"]
        finally:
            await s.close()

    run(body())


def test_a_worker_writes_the_trap_rows_of_the_partitions_it_holds_only(postgres):
    dsn = postgres.create_database()

    async def body():
        a, b = await _open(dsn), await _open(dsn)
        try:
            got = await a.acquire_many([PART_A], "worker-a", 60.0)
            await a.apply(Batch(meta={"traps": _trap_snapshot(KEY_A, KEY_B)}), partition_epochs=got)
            assert list((await b.trap_snapshot())["hosts"]) == [KEY_A]    # B's key is another worker's
            await a.release_many("worker-a", got)
            await b.acquire_many([PART_A], "worker-b", 60.0)
            with pytest.raises(StaleEpoch):   # a zombie's snapshot is refused with its batch
                await a.apply(Batch(meta={"traps": _trap_snapshot(KEY_B, KEY_A)}), partition_epochs=got)
            assert (await b.trap_snapshot([PART_A]))["hosts"] == {KEY_A: {"fetches": 1}}
        finally:
            await a.close()
            await b.close()

    run(body())


def test_a_workers_changed_rows_are_written_as_given_for_the_partitions_it_holds_only(postgres):
    """`Batch.defence` (a worker's save, runtime/shared_defence): the rows go in
    as they are, fenced like the snapshot's; the allowlist is a meta row."""
    dsn = postgres.create_database()
    origin_a, origin_b = f"http://{KEY_A}", f"http://{KEY_B}"

    async def body():
        a, b = await _open(dsn), await _open(dsn)
        try:
            got = await a.acquire_many([PART_A], "worker-a", 60.0)
            await a.apply(Batch(defence={"traps": {KEY_A: '{"fetches": 3}', KEY_B: '{"fetches": 4}'},
                                         "soft404": {origin_a: '[1, 0, 5.0, [], false]',
                                                     origin_b: '[1, 0, 6.0, [], false]'}},
                                meta={"traps_allow": '[["a.test", 10, "ops", 99.0]]'}), partition_epochs=got)
            traps = await b.trap_snapshot()
            assert traps["hosts"] == {KEY_A: {"fetches": 3}} and traps["allow"] == [["a.test", 10, "ops", 99.0]]
            assert (await b.soft404_snapshot())["hosts"] == {origin_a: [1, 0, 5.0, [], False]}
            await a.release_many("worker-a", got)
            await b.acquire_many([PART_A], "worker-b", 60.0)
            with pytest.raises(StaleEpoch):   # a zombie's rows are refused with its batch
                await a.apply(Batch(defence={"traps": {KEY_A: '{"fetches": 9}'}}), partition_epochs=got)
            assert (await b.trap_snapshot([PART_A]))["hosts"] == {KEY_A: {"fetches": 3}}
        finally:
            await a.close()
            await b.close()

    run(body())


def test_an_unchanged_trap_host_costs_no_statement_at_the_next_commit(postgres):
    dsn = postgres.create_database()

    async def body():
        s = await _open(dsn)
        try:
            epochs = await _hold_all(s)
            batch = Batch(meta={"traps": _trap_snapshot(KEY_A, KEY_B)})
            await s.apply(batch, partition_epochs=epochs)
            before = s.statements
            await s.apply(batch, partition_epochs=epochs)
            # BEGIN and COMMIT only: no trap_hosts upsert (so no partition to fence), no allow-list row
            assert s.statements - before == 2
            assert (await s.trap_snapshot())["hosts"] == {KEY_A: {"fetches": 1}, KEY_B: {"fetches": 2}}
        finally:
            await s.close()

    run(body())


def test_purges_recorded_at_once_get_distinct_ids_in_commit_order(postgres):
    dsn = postgres.create_database()

    async def body():
        s = await _open(dsn, pool_max=4)
        try:
            done = await asyncio.gather(*(s.add_purge(purge_of("host", f"h{i}.test"), float(i)) for i in range(6)))
            ids = sorted(p.id for p, _ in done)
            assert ids == list(range(1, 7))
            assert [r[0] for r in await s.purges(0)] == ids
        finally:
            await s.close()

    run(body())


def test_a_cluster_database_of_schema_3_upgrades_keeping_its_rows(postgres):
    dsn = postgres.create_database()

    async def body():
        conn = await asyncpg.connect(dsn)
        try:
            assert await migrate(conn, MIGRATIONS[:3]) == 3
            await conn.execute("INSERT INTO meta VALUES ('partitions', $1)", str(P))
            await conn.execute("INSERT INTO partitions (id) SELECT generate_series(0, $1 - 1)", P)
            await conn.execute("INSERT INTO urls (url, partition, key, state, discovered_at)"
                               " VALUES ('http://a.test/1', $1, 'a.test', 'fetched', 1.0)", PART_A)
            await conn.execute("INSERT INTO simhashes (doc_id, fp, scope) VALUES ('http://a.test/1', 7, 'a.test')")
            await conn.execute("INSERT INTO histories VALUES ('http://a.test/1', 'a.test', 1, 0, '[]')")
            await conn.execute("INSERT INTO flags VALUES ('http://a.test/1', 1.0, 'near_dup', 'x')")
            await conn.execute("INSERT INTO meta VALUES ('traps', $1)", _trap_snapshot(KEY_A, KEY_B))
        finally:
            await conn.close()
        s = await PostgresStore.open(dsn)
        try:
            assert [r[0] async for r in s.iter_simhashes([PART_A])] == ["http://a.test/1"]
            assert [r[0] async for r in s.iter_histories([PART_A])] == ["http://a.test/1"]
            assert [r[2] async for r in s.iter_flags(("near_dup",))] == ["near_dup"]
            # the whole snapshot an older worker kept in meta, read per partition
            assert list((await s.trap_snapshot([PART_B]))["hosts"]) == [KEY_B]
            assert await s.purges(0) == [] and await s.complaints() == []
        finally:
            await s.close()

    run(body())


def test_new_urls_in_a_purged_scope_are_marked_by_the_worker_that_takes_the_purge_up(postgres):
    dsn = postgres.create_database()

    async def body():
        s = await _open(dsn)
        try:
            stored, _ = await s.add_purge(purge_of("host", "a.test"), 1.0)
            await s.insert_urls([_new("http://a.test/late")])
            assert await s.apply_purges([stored], 2.0) == {"queued": 1, "other": 0}
            epochs = await _hold_all(s)
            assert await s.claim_new(epochs, 10) == []    # the inbox row of a purged URL is not work
        finally:
            await s.close()

    run(body())


def test_a_worker_that_gets_a_partition_back_writes_its_trap_rows_again(postgres):
    dsn = postgres.create_database()
    mine, theirs = _trap_snapshot(KEY_A), json.dumps({"version": 1, "allow": [], "hosts": {KEY_A: {"fetches": 9}}})

    async def body():
        a, b = await _open(dsn), await _open(dsn)
        try:
            got = await a.acquire_many([PART_A], "worker-a", 60.0)
            await a.apply(Batch(meta={"traps": mine}), partition_epochs=got)
            await a.release_many("worker-a", got)
            got = await b.acquire_many([PART_A], "worker-b", 60.0)
            await b.apply(Batch(meta={"traps": theirs}), partition_epochs=got)
            await b.release_many("worker-b", got)
            got = await a.acquire_many([PART_A], "worker-a", 60.0)
            await a.apply(Batch(meta={"traps": mine}), partition_epochs=got)   # the same text it wrote before
            assert (await b.trap_snapshot())["hosts"] == {KEY_A: {"fetches": 1}}
        finally:
            await a.close()
            await b.close()

    run(body())


def test_a_large_batch_of_simhashes_goes_through_copy_with_its_partitions(postgres):
    dsn = postgres.create_database()
    rows = [(f"http://{KEY_A if i % 2 else KEY_B}/{i}", i, KEY_A if i % 2 else KEY_B) for i in range(COPY_ROWS_MIN + 1)]

    async def body():
        s = await _open(dsn)
        try:
            await s.apply(Batch(simhashes=rows), partition_epochs=await _hold_all(s))
            assert [tuple(r) async for r in s.iter_simhashes([PART_A])] == [r for r in rows if r[2] == KEY_A]
            assert [tuple(r) async for r in s.iter_simhashes()] == rows
        finally:
            await s.close()

    run(body())
