"""WARC files on shared storage: a local folder or any fsspec URL.

`open_warc_output(out, worker_id, ...)` returns a WARC writer for a worker:

* a plain path (`/data/crawl`, `crawl-out`): files are written straight into
  `<out>/warc/` (no extra dependency);
* a URL (`s3://bucket/crawl`, `gs://...`, `file:///shared/crawl`,
  `memory://crawl`): files are written into a local spool folder and, once
  finished (rotation or close: the `.warc.gz` and its `.cdxj` beside it), copied
  to `<out>/warc/` through fsspec by one background thread, then removed from
  the spool. A crashed worker's spool is repaired and shipped on its next start.

File names carry the worker id (`{prefix}-{worker id}-...`), so workers never
collide on shared storage. Durability: `flush()` (what the store
acknowledges fetches after) makes the bytes durable in the spool; shipping
is asynchronous and `close()` waits for it.

Rules: fsspec is imported only for URLs; the remote file appears under its
final name only after the upload finished (uploaded as `.part`, then moved
where the backend can, else written directly: object stores publish whole
objects on completion anyway).
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from courtly.shell.warc import WarcWriter, repair

__all__ = ["open_warc_output", "ShippingWarcWriter", "is_url"]

log = logging.getLogger("courtly")


def is_url(out: str) -> bool:
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", out) is not None


def open_warc_output(out: str, worker_id: str, *, prefix: str, spool: str | None = None, **kw):
    """A WARC writer for `out` (folder or fsspec URL); names carry `worker_id`."""
    name_prefix = f"{prefix}-{worker_id}"
    if not is_url(out):
        folder = Path(out) / "warc"
        folder.mkdir(parents=True, exist_ok=True)
        repair(folder)
        return WarcWriter(folder, prefix=name_prefix, **kw)
    spool_dir = Path(spool) if spool else Path(tempfile.gettempdir()) / f"courtly-spool-{worker_id}"
    return ShippingWarcWriter(out.rstrip("/") + "/warc", spool_dir, prefix=name_prefix, **kw)


class ShippingWarcWriter:
    """A `WarcWriter` in a local spool whose finished files go to an fsspec URL."""

    def __init__(self, url: str, spool: Path, **kw) -> None:
        import fsspec

        self.url = url
        self.fs, self.root = fsspec.core.url_to_fs(url)
        self.fs.makedirs(self.root, exist_ok=True)
        self.spool = spool
        spool.mkdir(parents=True, exist_ok=True)
        repair(spool)
        self._writer = WarcWriter(spool, **kw)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warc-ship")
        self._lock = threading.Lock()
        self._shipped: list[str] = []
        self._futures: list[Future] = []
        self._queued: set[Path] = set()
        self.errors: list[str] = []
        for leftover in sorted(spool.glob("*.warc.gz")):   # an earlier run's finished files
            self._ship(leftover)

    # the WarcSink surface
    def write_exchange(self, **kw):
        ref = self._writer.write_exchange(**kw)
        self._ship_finished()
        return ref

    def write_revisit(self, **kw):
        ref = self._writer.write_revisit(**kw)
        self._ship_finished()
        return ref

    def write_conversion(self, **kw):
        ref = self._writer.write_conversion(**kw)
        self._ship_finished()
        return ref

    def flush(self) -> None:
        self._writer.flush()
        self._ship_finished()

    def close(self) -> None:
        self._writer.close()
        self._ship_finished()
        for f in list(self._futures):
            f.result()
        self._pool.shutdown(wait=True)

    @property
    def shipped(self) -> tuple[str, ...]:
        """Remote paths of the files shipped so far."""
        with self._lock:
            return tuple(self._shipped)

    def __getattr__(self, name: str):
        return getattr(self._writer, name)

    def _ship_finished(self) -> None:
        for path in self._writer.finished_paths:
            if path not in self._queued:
                self._ship(path)

    def _ship(self, path: Path) -> None:
        self._queued.add(path)
        self._futures.append(self._pool.submit(self._upload, path))

    def _upload(self, path: Path) -> None:
        index = path.with_name(path.name + ".cdxj")
        try:
            for local in (index, path):     # the index first: a visible WARC has its index
                if not local.exists():
                    continue
                remote = f"{self.root}/{local.name}"
                self.fs.put_file(str(local), remote + ".part")
                try:
                    self.fs.mv(remote + ".part", remote)
                except (NotImplementedError, OSError):
                    self.fs.put_file(str(local), remote)
                    self.fs.rm(remote + ".part")
            with self._lock:
                self._shipped.append(f"{self.root}/{path.name}")
            index.unlink(missing_ok=True)
            path.unlink(missing_ok=True)
        except Exception as e:   # keep the spool copy: shipped on the next start
            self.errors.append(f"{path.name}: {e}")
            log.error("could not ship %s to %s: %s (kept in %s)", path.name, self.url, e, self.spool)


def remove_spool(spool: Path) -> None:
    """Delete an empty spool folder (after a clean close)."""
    try:
        if spool.exists() and not any(spool.iterdir()):
            shutil.rmtree(spool)
    except OSError:
        pass
