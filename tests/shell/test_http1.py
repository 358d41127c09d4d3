"""The HTTP/1.1 wire behaviour of Http1Fetcher (courtly.shell.http1): keep-alive
reuse and its limits, the one retry, framing (chunked with trailers, close-
delimited, HTTP/1.0, 1xx interim heads, Content-Length mismatches) and
hostile heads. Raw asyncio servers on 127.0.0.1, port 0."""

from __future__ import annotations

import asyncio

from fetch_support import RawServer, fetch_one_raw, fetcher, fixed_response, run

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def serve_forever(response: bytes):
    """Answer every request on the connection with `response` (keep-alive)."""

    async def handler(server, reader, writer):
        while True:
            await server.read_request(reader)
            writer.write(response)
            await writer.drain()

    return handler


async def fetch_all(server: RawServer, f, n: int, path: str = "/"):
    return [await f.fetch(server.url(path)) for _ in range(n)]


def read_exchange(chunks: list[bytes], close: bool = True):
    """An Exchange fed `chunks` (then a clean close, unless it ended before)."""
    from courtly.shell.http1 import Exchange

    loop = asyncio.new_event_loop()
    try:
        x = Exchange(loop, 1 << 20, 1 << 16, 100)
        for c in chunks:
            x.feed(c)
        if close and not x.ended:
            x.lost(None)
        return x
    finally:
        loop.close()


# -- keep-alive and its limits -------------------------------------------------------


def test_keep_alive_reuses_the_connection_and_reports_the_peer():
    async def go():
        async with RawServer(serve_forever(OK)) as s, fetcher() as f:
            return await fetch_all(s, f, 4), s

    results, s = run(go())
    assert [r.content for r in results] == [b"ok"] * 4 and {r.ip for r in results} == {"127.0.0.1"}
    assert len(s.connections) == 1 and len(s.requests) == 4


def test_per_host_limit_makes_requests_wait_for_a_connection():
    open_now, peak = [0], [0]

    async def slow(server, reader, writer):
        open_now[0] += 1
        peak[0] = max(peak[0], open_now[0])
        try:
            while True:
                await server.read_request(reader)
                await asyncio.sleep(0.05)
                writer.write(OK)
                await writer.drain()
        finally:
            open_now[0] -= 1

    async def go():
        async with RawServer(slow) as s, fetcher(connections_per_host_max=2) as f:
            results = await asyncio.gather(*(f.fetch(s.url("/")) for _ in range(6)))
            return results, s

    results, s = run(go())
    assert all(r.status == 200 for r in results)
    assert len(s.connections) == 2 and peak[0] == 2 and len(s.requests) == 6


def test_total_limit_closes_an_idle_connection_of_another_host():
    async def go():
        async with RawServer(serve_forever(OK)) as a, RawServer(serve_forever(OK), host="127.0.0.2") as b, \
                fetcher(connections_max=1) as f:
            first = await f.fetch(a.url("/"))
            assert f.connections_open == 1
            second = await f.fetch(b.url("/"))       # a's idle connection makes room
            third = await f.fetch(a.url("/"))        # and b's for a again
            return [first, second, third], f.connections_open, a, b

    results, still_open, a, b = run(go())
    assert [r.status for r in results] == [200, 200, 200] and still_open == 1
    assert len(a.connections) == 2 and len(b.connections) == 1


def test_waiting_for_a_slot_is_bounded_by_the_caller_deadline():
    # The pool itself, not a fetch: two fetches with one total_s race each
    # other (the first to time out frees the slot for the second), so a
    # fetch-level version depended on the machine's load. Http1Fetcher.fetch
    # wraps the whole exchange, slot wait included, in asyncio.timeout(total_s).
    from courtly.shell.http1 import Pool

    key = ("http", "a.test", "127.0.0.1", 80)

    async def go():
        pool = Pool(connections_max=8, per_host_max=1, idle_s=1.0)
        held = await pool.acquire(key)
        timed_out = False
        try:
            async with asyncio.timeout(0.05):
                await pool.acquire(key)
        except TimeoutError:
            timed_out = True
        held.close()  # never connected: frees the counted slot
        again = await asyncio.wait_for(pool.acquire(key), 5)
        return timed_out, pool.open_count, again is not held

    assert run(go()) == (True, 1, True)


def test_idle_connections_close_after_idle_s():
    closed = []

    async def one_conn(server, reader, writer):
        try:
            while True:
                await server.read_request(reader)
                writer.write(OK)
                await writer.drain()
        except asyncio.IncompleteReadError:
            closed.append(True)  # the client hung up

    async def go():
        async with RawServer(one_conn) as s, fetcher(idle_s=0.1) as f:
            await f.fetch(s.url("/"))
            await asyncio.sleep(0.4)
            open_after = f.connections_open
            await f.fetch(s.url("/"))
            return open_after, s

    open_after, s = run(go())
    assert open_after == 0 and closed == [True] and len(s.connections) == 2


def test_a_cancelled_fetch_frees_its_connection():
    async def never(server, reader, writer):
        await server.read_request(reader)
        await asyncio.sleep(5)

    async def go():
        async with RawServer(never) as s, fetcher(connections_per_host_max=1) as f:
            task = asyncio.ensure_future(f.fetch(s.url("/")))
            await asyncio.sleep(0.1)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await asyncio.sleep(0.05)
            return f.connections_open

    assert run(go()) == 0


# -- the one retry -----------------------------------------------------------------------


def test_a_kept_alive_connection_closed_by_the_server_is_retried_once():
    async def once_per_connection(server, reader, writer):
        await server.read_request(reader)
        writer.write(OK)                          # keep-alive implied ...
        await writer.drain()
        await server.read_request(reader)         # ... but the next request is dropped
        writer.transport.abort()

    async def go():
        async with RawServer(once_per_connection) as s, fetcher() as f:
            return await fetch_all(s, f, 2), s

    results, s = run(go())
    assert [(r.status, r.content) for r in results] == [(200, b"ok"), (200, b"ok")]
    assert len(s.connections) == 2 and len(s.requests) == 3


def test_no_retry_once_part_of_the_response_came():
    async def partial_second(server, reader, writer):
        await server.read_request(reader)
        writer.write(OK)
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 O")
        await writer.drain()

    async def go():
        async with RawServer(partial_second) as s, fetcher() as f:
            return await fetch_all(s, f, 2), s

    (first, second), s = run(go())
    assert first.status == 200 and (second.status, second.error) == (0, "reset")
    assert len(s.requests) == 2 and len(s.connections) == 1


def test_no_retry_on_a_new_connection():
    async def hang_up(server, reader, writer):
        await server.read_request(reader)

    async def go():
        async with RawServer(hang_up) as s, fetcher() as f:
            return await f.fetch(s.url("/")), s

    r, s = run(go())
    assert r.error == "reset" and len(s.requests) == 1


def test_the_retry_asks_the_send_gate_again():
    asked = []

    async def once_per_connection(server, reader, writer):
        await server.read_request(reader)
        writer.write(OK)
        await writer.drain()
        await server.read_request(reader)
        writer.transport.abort()

    async def go():
        async with RawServer(once_per_connection) as s, fetcher(send_gate=True) as f:
            await f.fetch(s.url("/"))
            return await f.fetch(s.url("/"), gate=lambda: asked.append(1) or len(asked) < 2), s

    r, s = run(go())
    assert asked == [1, 1] and r.error == "not_sent" and len(s.requests) == 2


# -- framing -----------------------------------------------------------------------------


def test_chunked_body_with_trailers():
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n"

    async def go():
        async with RawServer(serve_forever(head + body)) as s, fetcher() as f:
            return await fetch_all(s, f, 2), s

    (r, again), s = run(go())
    assert (r.status, r.body, r.truncated, r.error) == (200, b"hello, world", None, None)
    assert r.response_head == head and "X-Checksum" not in r.headers
    assert again.body == b"hello, world" and len(s.connections) == 1


def test_close_delimited_body_is_complete_and_the_connection_not_reused():
    async def go():
        async with RawServer(fixed_response(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", b"until close")) as s, \
                fetcher() as f:
            return await fetch_all(s, f, 2), s

    results, s = run(go())
    assert [(r.status, r.body, r.truncated) for r in results] == [(200, b"until close", None)] * 2
    assert len(s.connections) == 2


def test_http_1_0_response_is_read_and_its_connection_not_reused():
    async def go():
        async with RawServer(serve_forever(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")) as s, fetcher() as f:
            return await fetch_all(s, f, 2), s

    results, s = run(go())
    assert [(r.status, r.body) for r in results] == [(200, b"ok")] * 2
    assert results[0].response_head.startswith(b"HTTP/1.0 200 OK\r\n") and len(s.connections) == 2


def test_transfer_encoding_wins_over_content_length_and_such_a_connection_is_not_reused():
    chunked = b"Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
    answers = [b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n" + chunked,        # RFC 9112 6.3 item 3
               b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n" + chunked]   # RFC 9112 6.1: faulty framing

    for answer in answers:
        async def go(answer=answer):
            async with RawServer(serve_forever(answer)) as s, fetcher() as f:
                return await fetch_all(s, f, 2), s

        results, s = run(go())
        assert [(r.status, r.body, r.truncated, r.error) for r in results] == [(200, b"ok", None, None)] * 2
        assert len(s.connections) == 2, answer  # closed after each answer


def test_interim_1xx_heads_are_skipped():
    final = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"

    async def early(server, reader, writer):
        await server.read_request(reader)
        for piece in (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early", b" Hints\r\nLink: </s.css>\r\n\r\n", final, b"ok"):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.01)

    r = fetch_one_raw(early)
    assert (r.status, r.body, r.error) == (200, b"ok", None)
    assert r.response_head == final and "Link" not in r.headers


def test_a_head_arriving_byte_by_byte_is_kept_byte_for_byte():
    head = b"HTTP/1.1 404 Not Found\r\nX-A: 1\r\nContent-Length: 3\r\n\r\n"

    async def dribble(server, reader, writer):
        await server.read_request(reader)
        for i in range(len(head)):
            writer.write(head[i:i + 1])
            await writer.drain()
        writer.write(b"nop")

    r = fetch_one_raw(dribble)
    assert (r.status, r.response_head, r.body) == (404, head, b"nop")


def test_short_body_is_truncated_disconnect_and_a_long_one_cut_at_content_length():
    short = fetch_one_raw(fixed_response(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", b"12345"))
    assert (short.status, short.truncated, short.body, short.error) == (200, "disconnect", b"12345", None)

    async def go():
        async with RawServer(serve_forever(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA")) as s, fetcher() as f:
            return await fetch_all(s, f, 2), s

    results, s = run(go())
    assert [(r.body, r.truncated) for r in results] == [(b"ok", None)] * 2
    assert len(s.connections) == 2  # bytes beyond the message: never reused


def test_a_body_in_tiny_chunks_is_held_in_memory_near_its_size():
    import tracemalloc

    body = bytes(range(256)) * 2048  # 512 KiB in 2-byte chunks: 256 Ki pieces of ~50 bytes each, were they kept
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + \
        b"".join(b"2\r\n%s\r\n" % body[i:i + 2] for i in range(0, len(body), 2)) + b"0\r\n\r\n"
    reads = [wire[i:i + 65536] for i in range(0, len(wire), 65536)]
    tracemalloc.start()
    try:
        x = read_exchange(reads)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (x.complete, x.error, b"".join(x.chunks)) == (True, None, body)
    assert peak < 5 * len(body), peak  # the buffer as it grows (kept apart: 22 times)


def test_chunk_framing_and_trailer_fields_are_held_to_the_head_cap():
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n"
    endless = read_exchange([head, b"0\r\nX-Trailer: "] + [b"t" * 4096] * 20, close=False)  # 80 KiB of one field
    assert (endless.error, endless.ended) == ("too_large_headers", True)
    endless = read_exchange([head] + [b"1;" + b"e" * 4094] * 20, close=False)  # one chunk extension
    assert endless.error == "too_large_headers"
    fine = read_exchange([head, b"0\r\n"] + [b"X-T%d: %s\r\n" % (i, b"t" * 1000) for i in range(40)] + [b"\r\n"])
    assert (fine.complete, fine.error, fine.chunks) == (True, None, [b"ok"])


# -- hostile heads -----------------------------------------------------------------------


def test_header_count_cap_is_exact():
    def head(n):
        return b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(n - 1)) + b"Content-Length: 0\r\n\r\n"

    assert fetch_one_raw(fixed_response(head(128))).status == 200
    r = fetch_one_raw(fixed_response(head(129)))
    assert (r.status, r.error) == (0, "too_large_headers")


def test_head_size_cap_counts_the_whole_head():
    head = b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 900 + b"\r\nContent-Length: 0\r\n\r\n"
    assert fetch_one_raw(fixed_response(head), fetcher(header_bytes_max=len(head))).status == 200
    r = fetch_one_raw(fixed_response(head), fetcher(header_bytes_max=len(head) - 1))
    assert (r.status, r.error) == (0, "too_large_headers")


def test_garbage_is_a_protocol_error_without_waiting_for_the_deadline():
    async def ssh(server, reader, writer):
        await server.read_request(reader)
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n")
        await asyncio.sleep(30)

    # a deadline far above what a loaded machine adds: waiting for it is a clear failure
    r = fetch_one_raw(ssh, fetcher(total_s=15))
    assert (r.status, r.error) == (0, "protocol") and r.elapsed_s < 15 / 2


def test_protocol_switch_and_bad_framing_are_protocol_errors():
    upgrade = fetch_one_raw(fixed_response(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n"))
    bad_chunk = fetch_one_raw(fixed_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"zz\r\n"))
    two_lengths = fetch_one_raw(fixed_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"))
    assert (upgrade.status, upgrade.error) == (0, "protocol")
    assert (bad_chunk.status, bad_chunk.error) == (0, "protocol")
    assert (two_lengths.status, two_lengths.error) == (0, "protocol")


def test_obs_fold_is_unfolded_and_one_content_length_said_twice_is_taken_once_wherever_split():
    # RFC 9112 5.2: a user agent MUST replace obs-fold with SP; RFC 9110 8.6: a recipient
    # MAY take Content-Length lines or a list of one same value as one. llhttp refuses both.
    for head in (b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n \tb\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n",
                 b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nX-Folded: a\r\n\tb\r\n\r\n"):
        wire = head + b"ok"
        for i in range(1, len(wire)):
            x = read_exchange([wire[:i], wire[i:]], close=False)
            assert (x.status, x.head, x.headers["X-Folded"], b"".join(x.chunks), x.reusable()) == \
                (200, head, "a b", b"ok", True), i
    for bad in (b"Content-Length: 2\r\nContent-Length: 3", b"Content-Length: 2, 3", b"Content-Length: +2",
                b"X-A: a\x00b\r\nContent-Length: 2", b"X-A: a\r\n b\x00\r\nContent-Length: 2"):
        x = read_exchange([b"HTTP/1.1 200 OK\r\n" + bad + b"\r\n\r\nok"])
        assert (x.status, x.error, x.chunks) == (0, "protocol", []), bad


def test_request_head_is_exactly_what_was_sent():
    async def go():
        async with RawServer(serve_forever(OK)) as s, fetcher() as f:
            plain = await f.fetch(s.url("/p?q=1#frag"))
            custom = await f.fetch(s.url("/"), headers={"accept": "text/plain", "If-None-Match": '"x"'})
            return plain, custom, s

    plain, custom, s = run(go())
    assert [plain.request_head, custom.request_head] == s.requests
    assert plain.request_head.startswith(b"GET /p?q=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % s.port)
    assert b"\r\naccept: text/plain\r\n" in custom.request_head and b"Accept: text/html" not in custom.request_head


def test_a_second_response_in_the_same_read_changes_nothing_of_the_first():
    first = b"HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nok"
    for second in (b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", b"HTTP/1.1 100 Continue\r\n\r\n"):
        x = read_exchange([first + second], close=False)
        assert (x.status, dict(x.headers), x.chunks, x.complete) == (200, {"X-A": "1", "Content-Length": "2"}, [b"ok"], True)
        assert x.dirty and not x.reusable()


def test_responses_without_body_keep_their_head_and_the_connection():
    heads = [b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n", b"HTTP/1.1 304 Not Modified\r\nETag: \"e\"\r\n\r\n",
             b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]

    async def answers(server, reader, writer):
        for head in heads:
            await server.read_request(reader)
            writer.write(head)
        await server.read_request(reader)
        writer.write(heads[0] + b"junk")  # bytes beyond a message without body
        await server.read_request(reader)  # (were the connection reused, "junk" would start the next answer)
        writer.write(OK)

    async def go():
        async with RawServer(answers) as s, fetcher() as f:
            results = await fetch_all(s, f, 4)
            return results, await f.fetch(s.url("/")), s

    results, after, s = run(go())
    assert [(r.status, r.response_head, r.body) for r in results] == [(int(h[9:12]), h, b"") for h in heads + heads[:1]]
    assert after.status == 204 and len(s.connections) == 2  # after the junk, a new connection


def test_closing_the_fetcher_ends_requests_waiting_for_a_slot():
    async def never(server, reader, writer):
        await server.read_request(reader)
        await asyncio.sleep(5)

    async def go():
        async with RawServer(never) as s:
            f = fetcher(connections_per_host_max=1)
            holder = asyncio.ensure_future(f.fetch(s.url("/")))
            waiter = asyncio.ensure_future(f.fetch(s.url("/")))
            await asyncio.sleep(0.1)
            await f.close()
            return await holder, await waiter, f.connections_open, s

    holder, waiter, still_open, s = run(go())
    assert (holder.status, holder.error) == (0, "reset")
    assert (waiter.status, waiter.error) == (0, "not_sent") and still_open == 0 and len(s.requests) == 1


def test_an_exchange_reads_the_same_wherever_the_chunks_split():
    from courtly.shell.http1 import Exchange

    wire = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 10\r\n\r\n"
            b"0123456789")

    def read(chunks):
        loop = asyncio.new_event_loop()
        try:
            x = Exchange(loop, 1 << 20, 1 << 16, 100)
            for c in chunks:
                x.feed(c)
            return x.status, x.head, list(x.headers.items()), b"".join(x.chunks), x.complete, x.dirty, x.error
        finally:
            loop.close()

    whole = read([wire])
    assert whole == (200, wire[25:-10], [("X-A", "1"), ("Content-Length", "10")], b"0123456789", True, False, None)
    for i in range(1, len(wire)):
        for j in range(i, len(wire), 7):
            assert read([wire[:i], wire[i:j], wire[j:]]) == whole, (i, j)


def test_empty_lines_and_1xx_heads_with_framing_before_the_final_head_are_skipped_wherever_split():
    final = b"HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 2\r\n\r\n"
    # llhttp skips empty lines before a status line, and reads a body after a 1xx head
    # other than 100, 102 and 103 were it left to: a 1xx has none (RFC 9110 15.2)
    wire = b"\r\n\r\nHTTP/1.1 199 Odd\r\nContent-Length: 3\r\n\r\n\r\nHTTP/1.1 104 X\r\n\r\n" + final + b"ok"
    for i in range(1, len(wire)):
        x = read_exchange([wire[:i], wire[i:]])
        assert (x.status, x.head, x.headers.get("X-A"), b"".join(x.chunks), x.complete, x.error) == \
            (200, final, "1", b"ok", True, None), i


def test_a_flood_of_1xx_heads_is_a_protocol_error():
    import time

    final = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    few = read_exchange([b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n" * 32 + final])
    assert (few.status, few.chunks, few.error) == (200, [b"ok"], None)
    t0 = time.perf_counter()  # each 1xx head skipped copied the rest of the read: quadratic
    flood = read_exchange([b"HTTP/1.1 102 Processing\r\n\r\n" * 40_000 + final])
    assert (flood.status, flood.error) == (0, "protocol") and time.perf_counter() - t0 < 0.1


def test_a_status_code_under_100_or_another_protocol_is_a_protocol_error():
    for line in (b"HTTP/1.1 000 X", b"HTTP/1.1 099 X", b"ICE/1.0 200 OK", b"RTSP/1.0 200 OK"):
        x = read_exchange([line + b"\r\nContent-Length: 0\r\n\r\n"])
        assert (x.status, x.error, x.chunks) == (0, "protocol", []), line


# -- transfer codings (RFC 9112 6.3, 7) ----------------------------------------------------


def test_the_close_ends_the_body_exactly_when_chunked_is_not_the_final_transfer_coding():
    import httptools

    values = [b"chunked", b"Chunked", b"gzip, chunked", b"gzip,\tchunked", b"chunked, gzip", b"chunked ,", b"chunked\t",
              b"chunked;x=1", b"xchunked", b"gzip"]
    for lines in [[v] for v in values] + [[b"chunked", b"gzip"], [b"gzip", b"chunked"]]:
        head = b"HTTP/1.1 200 OK\r\n" + b"".join(b"Transfer-Encoding: %s\r\n" % v for v in lines) + b"\r\n"

        class Probe:  # does llhttp itself de-chunk?
            ended = False

            def on_message_complete(self):
                self.ended = True

        probe = Probe()
        httptools.HttpResponseParser(probe).feed_data(head + b"2\r\nok\r\n0\r\n\r\n")
        cut = read_exchange([head + b"5\r\nhel"])  # the peer hangs up: complete only if close-delimited
        assert (cut.complete, cut.truncated) == ((False, "disconnect") if probe.ended else (True, None)), lines


def test_transfer_codings_other_than_chunked_are_undone_or_refused():
    import gzip
    import zlib

    page = b"<p>transfer-coded</p>" * 50

    def chunked(data):
        return b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)

    def fetch(te: bytes, body: bytes, extra: bytes = b""):
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: " + te + b"\r\n" + extra + b"\r\n"
        return fetch_one_raw(fixed_response(head, body), fetcher(body_bytes_max=1 << 20))

    for te, body in ((b"gzip, chunked", chunked(gzip.compress(page))), (b"deflate, chunked", chunked(zlib.compress(page))),
                     (b"gzip", gzip.compress(page)),  # delimited by the close
                     (b"chunked\r\nTransfer-Encoding: chunked", chunked(page))):  # a line sent twice, chunked once
        r = fetch(te, body)
        assert (r.status, r.body, r.content, r.truncated, r.error) == (200, page, page, None, None), te
    stacked = fetch(b"gzip", gzip.compress(gzip.compress(page)), b"Content-Encoding: gzip\r\n")
    assert stacked.content == page and gzip.decompress(stacked.body) == page  # the content coding stays on the body
    bomb = fetch(b"gzip, chunked", chunked(gzip.compress(b"\0" * (8 << 20))))
    assert (bomb.status, bomb.truncated, len(bomb.body)) == (200, "length", 1 << 20)
    for te, body in ((b"chunked, gzip", gzip.compress(chunked(page))), (b"compress, chunked", chunked(b"xx")),
                     (b"gzip, chunked", chunked(b"not gzip at all"))):
        r = fetch(te, body)
        assert (r.status, r.error, r.body) == (0, "protocol", b""), te
