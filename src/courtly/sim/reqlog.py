"""The simulated web's request log: one JSON object per line, per request.

Fields of a record:

    arrived_at, completed_at   time.time() when the request head was parsed
                               and when the last byte was handed to the socket
                               (or the client went away)
    host        the Host header as sent (e.g. "site0001.test:8123")
    conn        client ip:port of the TCP connection (connection id)
    ip          local IP the request arrived on (= the address the client resolved)
    method, path (with query), status (0 = no status line was sent),
    bytes       body bytes written
    conditional request carried If-None-Match or If-Modified-Since
    tag         behaviour tag (slow, throttle_429, trap_calendar, ssrf_bait, ...) or null
    retry_after_at  for 429/503 with Retry-After: the instant it names, else null
    aborted     true when the client closed before the response was complete
    agent       the User-Agent header ("" when absent): which crawler process asked

Writes are buffered in memory and flushed at least every `flush_every_s`
(the server runs `run_flusher`) and on `close()`. Append-only, never rewritten.

A request for the reserved name `FLUSH_MARKER_HOST` (an RFC 6761 `.invalid`
name no crawler can resolve) is a flush marker: whoever reads the file can
wait until a marker it sent is there, and then holds every request answered
before it. `iter_log` and `load_log` leave markers out, so no reader counts
them as the crawler's.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator

__all__ = ["LogRecord", "RequestLog", "load_log", "iter_log"]


@dataclass(frozen=True, slots=True)
class LogRecord:
    arrived_at: float
    completed_at: float
    host: str
    conn: str
    ip: str
    method: str
    path: str
    status: int
    bytes: int
    conditional: bool
    tag: str | None = None
    retry_after_at: float | None = None
    aborted: bool = False
    agent: str = ""

    def to_json(self) -> str:
        return json.dumps({
            "arrived_at": self.arrived_at, "completed_at": self.completed_at, "host": self.host,
            "conn": self.conn, "ip": self.ip, "method": self.method, "path": self.path,
            "status": self.status, "bytes": self.bytes, "conditional": self.conditional,
            "tag": self.tag, "retry_after_at": self.retry_after_at, "aborted": self.aborted,
            "agent": self.agent,
        }, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> "LogRecord":
        return cls(
            arrived_at=float(d["arrived_at"]),  # type: ignore[arg-type]
            completed_at=float(d["completed_at"]),  # type: ignore[arg-type]
            host=str(d["host"]), conn=str(d.get("conn", "")), ip=str(d.get("ip", "")),
            method=str(d.get("method", "GET")), path=str(d["path"]), status=int(d["status"]),  # type: ignore[call-overload]
            bytes=int(d.get("bytes", 0)), conditional=bool(d.get("conditional", False)),  # type: ignore[call-overload]
            tag=d.get("tag"),  # type: ignore[arg-type]
            retry_after_at=(None if d.get("retry_after_at") is None else float(d["retry_after_at"])),  # type: ignore[arg-type]
            aborted=bool(d.get("aborted", False)),
            agent=str(d.get("agent", "")),
        )


class RequestLog:
    """Buffered JSON-lines writer. `path=None` keeps records in memory only."""

    def __init__(self, path: str | Path | None, *, keep: bool = False, flush_every_s: float = 1.0) -> None:
        self.path = Path(path) if path is not None else None
        self.keep = keep
        self.flush_every_s = flush_every_s
        self.count = 0
        self._pending: list[str] = []
        self._kept: list[LogRecord] = []
        self._file: IO[str] | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")

    def add(self, record: LogRecord) -> None:
        self.count += 1
        if self.keep:
            self._kept.append(record)
        if self._file is not None:
            self._pending.append(record.to_json())

    def records(self) -> list[LogRecord]:
        """Records kept in memory (only with keep=True)."""
        return list(self._kept)

    def flush(self) -> None:
        if self._file is None or not self._pending:
            return
        self._file.write("\n".join(self._pending) + "\n")
        self._pending.clear()
        self._file.flush()

    async def run_flusher(self) -> None:
        while True:
            await asyncio.sleep(self.flush_every_s)
            self.flush()

    def close(self) -> None:
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None


FLUSH_MARKER_HOST = "flush-marker.invalid"


def iter_log(path: str | Path) -> Iterator[LogRecord]:
    """The records of the log file, flush markers left out."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                record = LogRecord.from_dict(json.loads(line))
                if record.host.rsplit(":", 1)[0] != FLUSH_MARKER_HOST:
                    yield record


def load_log(path: str | Path) -> list[LogRecord]:
    return list(iter_log(path))
