"""Http1Fetcher against loopback servers: encodings, caps, hostile peers, pinning.

aiohttp test servers cover the ordinary cases; raw asyncio servers play the
hostile ones (drips, bombs, endless bodies, huge heads). Every server binds a
127.0.0.0/8 address on port 0; nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import datetime
import gzip
import ipaddress
import ssl
import tracemalloc
import zlib

import brotli
import pytest
import zstandard
from aiohttp import web

from courtly.core.netpolicy import NetPolicy
from courtly.shell.fetcher import FetchResult, Http1Fetcher
from courtly.shell.resolver import SafeResolver
from fetch_support import LOOPBACK, UA, AppServer, RawServer, fetch_one_raw, fetcher, fixed_response, run

# a 1000-byte drip at 0.02 s a byte lasts 20 s; a fetch cut at its deadline ends long before
DRIP_S = 1000 * 0.02
PAGE = b"<html><body>" + b"<p>courtly fetches politely.</p>\n" * 1000 + b"</body></html>"


# -- ordinary responses -------------------------------------------------------------


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


ENCODINGS = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,
    "deflate-raw": _raw_deflate,  # sent as "deflate"; many servers do this
    "br": brotli.compress,
    "zstd": lambda d: zstandard.ZstdCompressor().compress(d),
    "gzip, br": lambda d: brotli.compress(gzip.compress(d)),
    "deflate, zstd": lambda d: zstandard.ZstdCompressor().compress(zlib.compress(d)),
    "identity": lambda d: d,
}


@pytest.mark.parametrize("coding", list(ENCODINGS))
def test_200_keeps_raw_body_and_decodes_each_encoding(coding):
    encoded = ENCODINGS[coding](PAGE)
    header = "deflate" if coding == "deflate-raw" else coding

    async def page(request):
        return web.Response(body=encoded, headers={"Content-Encoding": header, "Content-Type": "text/html"})

    async def go():
        async with AppServer({"/": page}) as s, fetcher() as f:
            return await f.fetch(s.url("/")), s

    r, s = run(go())
    assert (r.status, r.error, r.truncated) == (200, None, None)
    assert r.body == encoded
    assert r.content == PAGE
    assert r.headers["content-encoding"] == header
    assert r.ip == "127.0.0.1"
    assert r.response_head.startswith(b"HTTP/1.1 200 OK\r\n") and r.response_head.endswith(b"\r\n\r\n")


def test_request_carries_user_agent_accept_encoding_and_caller_headers():
    async def go():
        async with RawServer(fixed_response(b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n")) as s, fetcher() as f:
            r = await f.fetch(s.url("/a?b=1"), headers={"If-None-Match": '"v1"', "If-Modified-Since": "Mon, 01 Jan 2024 00:00:00 GMT"})
            return r, s

    r, s = run(go())
    assert r.status == 304 and r.error is None and r.body == b"" and r.content == b""
    assert r.response_head == b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n" and r.headers["etag"] == '"v1"'
    sent = s.requests[0]
    assert r.request_head == sent  # reconstructed byte for byte
    assert sent.startswith(b"GET /a?b=1 HTTP/1.1\r\n")
    for line in (f"User-Agent: {UA}", "Accept-Encoding: gzip, deflate", 'If-None-Match: "v1"',
                 "If-Modified-Since: Mon, 01 Jan 2024 00:00:00 GMT", f"Host: 127.0.0.1:{s.port}"):
        assert f"\r\n{line}\r\n".encode() in sent


def test_response_head_is_the_raw_header_lines():
    head = b"HTTP/1.1 200 OK\r\nX-Weird-Case: A\r\nset-cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\n\r\n"
    r = fetch_one_raw(fixed_response(head, b"ok"))
    assert r.response_head == head
    assert r.headers.getall("set-cookie") == ["a=1", "b=2"]
    assert r.body == r.content == b"ok"


def fetch_measuring_memory(handler, f: Http1Fetcher | None = None) -> tuple[FetchResult, int]:
    """The result and the peak of traced Python memory during the fetch."""

    async def go():
        async with RawServer(handler) as s, (f or fetcher()) as ff:
            tracemalloc.start()
            try:
                r = await ff.fetch(s.url("/"))
                return r, tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()

    return run(go())


def test_redirect_is_returned_not_followed():
    hits = []

    async def moved(request):
        raise web.HTTPMovedPermanently("/elsewhere")

    async def elsewhere(request):
        hits.append(1)
        return web.Response(text="here")

    async def go():
        async with AppServer({"/": moved, "/elsewhere": elsewhere}) as s, fetcher() as f:
            return await f.fetch(s.url("/"))

    r = run(go())
    assert r.status == 301 and r.error is None
    assert r.headers["Location"] == "/elsewhere"
    assert hits == []


def test_keep_alive_reuses_one_connection():
    async def page(request):
        return web.Response(body=PAGE)

    async def go():
        async with AppServer({"/": page}) as s, fetcher() as f:
            for _ in range(5):
                r = await f.fetch(s.url("/"))
                assert r.status == 200
            return s

    s = run(go())
    assert len(s.peers) == 5 and len(set(s.peers)) == 1


def test_send_gate_is_asked_when_the_connection_is_ready_and_a_no_sends_nothing():
    async def page(request):
        return web.Response(body=PAGE)

    asked = []

    async def go():
        async with AppServer({"/": page}) as s, fetcher(send_gate=True) as f:
            first = await f.fetch(s.url("/"), gate=lambda: asked.append("new") or True)      # new connection
            second = await f.fetch(s.url("/"), gate=lambda: asked.append("reused") or True)  # keep-alive
            refused = await f.fetch(s.url("/"), gate=lambda: False)
            ungated = await f.fetch(s.url("/"))
            return s, first, second, refused, ungated

    s, first, second, refused, ungated = run(go())
    assert first.status == second.status == ungated.status == 200 and asked == ["new", "reused"]
    assert refused.status == 0 and refused.error == "not_sent" and refused.body == b""
    assert len(s.peers) == 3                          # the refused request never reached the server


def test_without_send_gate_the_gate_argument_is_not_consulted():
    async def page(request):
        return web.Response(body=PAGE)

    async def go():
        async with AppServer({"/": page}) as s, fetcher() as f:
            return await f.fetch(s.url("/"), gate=lambda: False)

    assert run(go()).status == 200


# -- limits and hostile peers ---------------------------------------------------------


def test_drip_body_is_cut_at_total_deadline_with_truncated_time():
    async def drip(server, reader, writer):
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        for _ in range(1000):
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(0.02)

    r = fetch_one_raw(drip, fetcher(total_s=0.6))
    assert r.status == 200 and r.truncated == "time" and r.error is None
    assert 0 < len(r.body) < 100 and r.content == r.body
    assert r.elapsed_s < DRIP_S / 2     # cut, not waited out (no tighter bound: the machine may be loaded)


def test_drip_head_times_out_without_a_response():
    async def drip(server, reader, writer):
        await server.read_request(reader)
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"y" * 1000:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.02)

    r = fetch_one_raw(drip, fetcher(total_s=0.5))
    assert (r.status, r.error, r.truncated) == (0, "timeout", None)
    assert r.elapsed_s < DRIP_S / 2


def test_oversized_body_is_truncated_at_body_bytes_max():
    async def big(request):
        return web.Response(body=b"z" * 300_000)

    async def go():
        async with AppServer({"/": big}) as s, fetcher(body_bytes_max=100_000) as f:
            return await f.fetch(s.url("/"))

    r = run(go())
    assert r.status == 200 and r.truncated == "length" and r.error is None
    assert len(r.body) == 100_000 and r.content == r.body


def test_endless_chunked_body_is_cut():
    async def endless(server, reader, writer):
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"4000\r\n" + b"c" * 0x4000 + b"\r\n"
        while True:
            writer.write(chunk)
            await writer.drain()

    r = fetch_one_raw(endless, fetcher(body_bytes_max=200_000, total_s=5))
    assert r.status == 200 and r.truncated == "length"
    assert len(r.body) == 200_000 and set(r.body) == {ord("c")}


def test_peer_hanging_up_mid_body_gives_truncated_disconnect():
    r = fetch_one_raw(fixed_response(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", b"partial"))
    assert r.status == 200 and r.truncated == "disconnect" and r.body == b"partial"


def _gzip_bomb() -> bytes:
    member = gzip.compress(b"\0" * (10 << 20), 1)  # ~10 KB
    return member * 100                            # 1 GiB decoded from ~1 MB


def test_gzip_bomb_is_stopped_with_bounded_memory():
    bomb = _gzip_bomb()
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(bomb)
    r, peak = fetch_measuring_memory(fixed_response(head, bomb), fetcher(decoded_bytes_max=8 << 20))
    assert r.status == 200 and r.error == "decode_bomb"
    assert r.body == bomb  # raw bytes kept for the WARC record
    assert len(r.content) == 8 << 20 and not any(r.content[:4096])
    assert peak < 40 << 20, peak  # raw body, its copy in flight, 2 x the cap


def test_brotli_bomb_is_stopped_by_the_ratio_rule():
    bomb = brotli.compress(b"\0" * (64 << 20), quality=5)  # a few hundred bytes
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: %d\r\n\r\n" % len(bomb)
    r, peak = fetch_measuring_memory(fixed_response(head, bomb))
    assert r.status == 200 and r.error == "decode_bomb" and "ratio" in r.error_detail
    assert r.body == bomb
    assert len(r.content) == 1 << 20  # the ratio rule's floor
    assert peak < 8 << 20, peak


def test_corrupt_encoding_reports_decode_and_keeps_raw_body():
    junk = b"this is not gzip at all"
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(junk)
    r = fetch_one_raw(fixed_response(head, junk))
    assert r.status == 200 and r.error == "decode" and r.body == junk and r.content == b""


def test_content_codings_on_several_header_lines_are_one_list():
    body = brotli.compress(gzip.compress(PAGE))
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Encoding: br\r\nContent-Length: %d\r\n\r\n" % len(body)
    r = fetch_one_raw(fixed_response(head, body))
    assert (r.status, r.error, r.body, r.content) == (200, None, body, PAGE)


def test_unknown_encoding_reports_decode():
    r = fetch_one_raw(fixed_response(b"HTTP/1.1 200 OK\r\nContent-Encoding: compress\r\nContent-Length: 2\r\n\r\n", b"ab"))
    assert r.error == "decode" and "compress" in r.error_detail and r.body == b"ab"


def test_huge_header_line_is_refused():
    head = b"HTTP/1.1 200 OK\r\nX-Huge: " + b"h" * 100_000 + b"\r\nContent-Length: 0\r\n\r\n"
    r = fetch_one_raw(fixed_response(head))
    assert (r.status, r.error) == (0, "too_large_headers"), r.error_detail


def test_many_header_lines_over_the_total_are_refused():
    lines = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 1000) for i in range(100))  # ~100 KB
    r = fetch_one_raw(fixed_response(b"HTTP/1.1 200 OK\r\n" + lines + b"Content-Length: 0\r\n\r\n"))
    assert (r.status, r.error) == (0, "too_large_headers"), r.error_detail


def test_too_many_header_lines_are_refused():
    lines = b"".join(b"X-H%d: v\r\n" % i for i in range(1000))
    r = fetch_one_raw(fixed_response(b"HTTP/1.1 200 OK\r\n" + lines + b"Content-Length: 0\r\n\r\n"))
    assert (r.status, r.error) == (0, "too_large_headers"), r.error_detail


def test_garbage_response_is_a_protocol_error():
    r = fetch_one_raw(fixed_response(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"))
    assert r.status == 0 and r.error == "protocol", (r.error, r.error_detail)


def test_close_before_head_is_reset_and_refused_port_is_connect():
    async def hang_up(server, reader, writer):
        await server.read_request(reader)

    r = fetch_one_raw(hang_up)
    assert (r.status, r.error) == (0, "reset"), r.error_detail

    async def go():
        async with RawServer(hang_up) as s:
            url = s.url("/")
        async with fetcher() as f:  # the server is gone: nobody listens on the port
            return await f.fetch(url)

    r = run(go())
    assert (r.status, r.error) == (0, "connect"), r.error_detail


def test_invalid_urls_are_errors_not_exceptions():
    async def go():
        async with fetcher() as f:
            return [await f.fetch(u) for u in ("ftp://example.test/", "not a url", "http:///nohost")]

    for r in run(go()):
        assert r.error == "invalid_url" and r.status == 0


def test_header_injection_is_refused():
    async def go():
        async with RawServer(fixed_response(b"HTTP/1.1 204 No Content\r\n\r\n")) as s, fetcher() as f:
            r = await f.fetch(s.url("/"), headers={"X-A": "b\r\nX-Injected: 1"})
            return r, s

    r, s = run(go())
    assert r.error == "invalid_request" and s.requests == []


# -- the address: pinning and the SSRF guard ----------------------------------------------


def test_connection_goes_to_the_pinned_ip_with_host_header_of_the_name():
    seen = []

    async def page(request):
        seen.append((request.transport.get_extra_info("sockname")[0], request.headers["Host"]))
        return web.Response(text="pinned")

    async def go():
        async with AppServer({"/": page}, host="127.0.0.2") as s:
            policy = NetPolicy.allowing(["127.0.0.2/32"])
            async with fetcher(policy, overrides={"pinned.test": ["127.0.0.2"]}) as f:
                r1 = await f.fetch(s.url("/", host="pinned.test"))
            async with fetcher(policy) as f:  # no override: the caller's ip is used, no lookup
                r2 = await f.fetch(s.url("/", host="caller.test"), ip="127.0.0.2")
            return r1, r2, s.port

    r1, r2, port = run(go())
    assert (r1.status, r1.ip, r1.content) == (200, "127.0.0.2", b"pinned")
    assert (r2.status, r2.ip) == (200, "127.0.0.2")
    assert seen == [("127.0.0.2", f"pinned.test:{port}"), ("127.0.0.2", f"caller.test:{port}")]
    assert f"Host: pinned.test:{port}\r\n".encode() in r1.request_head


def test_non_permitted_address_is_never_connected_to():
    async def go():
        async with RawServer(fixed_response(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), host="127.0.0.3") as s:
            policy = NetPolicy.allowing(["127.0.0.1/32", "127.0.0.2/32"])
            async with fetcher(policy, overrides={"bait.test": ["127.0.0.3"]}) as f:
                results = [
                    await f.fetch(s.url("/", host="bait.test")),
                    await f.fetch(s.url("/")),  # the literal
                    await f.fetch(s.url("/", host="caller.test"), ip="127.0.0.3"),
                    await f.fetch(s.url("/", host="127.0.0.3"), ip="127.0.0.1"),  # literal wins over ip=
                    await f.fetch(f"http://[::ffff:127.0.0.3]:{s.port}/"),
                ]
            return results, s

    results, s = run(go())
    for r in results:
        assert (r.status, r.error) == (0, "non_public"), (r.url, r.error, r.error_detail)
    assert s.connections == []


def test_a_name_dressed_as_an_ip_with_a_zone_id_gets_no_second_lookup():
    # "93.184.216.34%25.evil.test" was judged as the public 93.184.216.34 and
    # then given to connect() as written, whose getaddrinfo resolved the name.
    async def go():
        loop = asyncio.get_running_loop()
        looked_up = []

        async def tripwire(host, *args, **kwargs):
            looked_up.append(host)
            raise OSError("a second lookup")

        loop.getaddrinfo = tripwire

        async def evil_dns(host):
            return [("127.0.0.1", 60.0)]

        f = Http1Fetcher(SafeResolver(NetPolicy(), lookup=evil_dns), user_agent=UA)
        async with f:
            results = [await f.fetch("http://93.184.216.34%25.evil.test/"),
                       await f.fetch("http://caller.test/", ip="93.184.216.34%.evil.test")]
        return results, looked_up

    results, looked_up = run(go())
    assert looked_up == []
    for r in results:
        assert (r.status, r.error) == (0, "non_public"), (r.url, r.error, r.error_detail)


def test_dns_failure_is_an_error_kind():
    async def go():
        async def nx(host):
            from courtly.core.types import Reason
            from courtly.shell.resolver import ResolveFailed

            raise ResolveFailed(Reason.DNS, f"{host}: NXDOMAIN")

        f = Http1Fetcher(SafeResolver(LOOPBACK, lookup=nx), user_agent=UA)
        async with f:
            return await f.fetch("http://gone.test/")

    r = run(go())
    assert (r.status, r.error) == (0, "dns") and "NXDOMAIN" in r.error_detail


# -- TLS --------------------------------------------------------------------------------


def _tls_material(tmp_path):
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "courtly test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(1).not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tls.test")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
        .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("tls.test"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert_path, key_path)
    client_ctx = ssl.create_default_context(cadata=ca.public_bytes(serialization.Encoding.PEM).decode())
    return server_ctx, client_ctx


def test_https_verifies_certificates_and_sends_sni_of_the_name(tmp_path):
    server_ctx, client_ctx = _tls_material(tmp_path)
    sni = []
    server_ctx.sni_callback = lambda sock, name, ctx: sni.append(name)

    async def page(request):
        return web.Response(text="secure")

    async def go():
        app = web.Application()
        app.router.add_get("/", page)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx)
        await site.start()
        port = runner.addresses[0][1]
        over = {"tls.test": ["127.0.0.1"]}
        try:
            async with fetcher(overrides=over, ssl_context=client_ctx) as f:
                good = await f.fetch(f"https://tls.test:{port}/")
            async with fetcher(overrides=over) as f:  # system trust store: our CA is unknown
                bad = await f.fetch(f"https://tls.test:{port}/")
            return good, bad
        finally:
            await runner.cleanup()

    good, bad = run(go())
    assert (good.status, good.content, good.error) == (200, b"secure", None)
    assert "tls.test" in sni
    assert (bad.status, bad.error) == (0, "tls"), bad.error_detail


# -- decoding details ----------------------------------------------------------------


def test_truncated_encoded_body_decodes_its_prefix_without_error():
    encoded = gzip.compress(PAGE, 1)
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(encoded)
    r = fetch_one_raw(fixed_response(head, encoded[: len(encoded) // 2]))
    assert r.truncated == "disconnect" and r.error is None
    assert r.content and PAGE.startswith(r.content)


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_decoding_stops_at_decoded_bytes_max(coding):
    from courtly.shell.decode import decode_body

    text = bytes(range(256)) * 40_000  # 10 MB, compresses ~100x at most
    encoded = ENCODINGS[coding](text)
    d = decode_body(encoded, coding, decoded_bytes_max=3_000_000, ratio_max=1e9)
    assert d.error == "decode_bomb" and d.content == text[:3_000_000]


def test_multi_member_gzip_decodes_every_member():
    from courtly.shell.decode import decode_body

    d = decode_body(gzip.compress(b"one ") + gzip.compress(b"two"), "gzip", decoded_bytes_max=1 << 20, ratio_max=100)
    assert (d.content, d.error) == (b"one two", None)


def test_fetch_after_close_is_a_programming_error():
    async def go():
        f = fetcher()
        await f.close()
        with pytest.raises(RuntimeError):
            await f.fetch("http://127.0.0.1:1/")

    run(go())


def test_a_validator_in_raw_octets_goes_back_as_those_octets():
    # an ETag that is not UTF-8 is read with surrogateescape; a conditional
    # GET echoes it byte for byte instead of failing to encode the request
    async def handler(server, reader, writer):
        head = await server.read_request(reader)
        if b"If-None-Match" in head:
            writer.write(b"HTTP/1.1 304 Not Modified\r\nETag: \"\xff\"\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nETag: \"\xff\"\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await handler(server, reader, writer)

    async def go():
        async with RawServer(handler) as s, fetcher() as f:
            first = await f.fetch(s.url())
            second = await f.fetch(s.url(), headers={"If-None-Match": first.headers["etag"]})
            return first, second, s.requests

    first, second, requests = run(go())
    assert (first.status, second.status, second.error) == (200, 304, None)
    assert b'If-None-Match: "\xff"\r\n' in requests[1]
