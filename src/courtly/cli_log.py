"""The `courtly` command's stderr: the `courtly` logger as text or JSON lines,
and `say`, a line for the operator that keeps stderr one JSON object per line
in JSON mode."""

from __future__ import annotations

import json
import sys

__all__ = ["json_logs", "say", "setup_logging"]

_JSON_LOGS = False   # set by setup_logging, once per command


def json_logs() -> bool:
    """Whether stderr is JSON lines (--log-format json): no progress display then."""
    return _JSON_LOGS


def setup_logging(log_format: str = "text", verbose: bool = False) -> None:
    """The `courtly` logger on stderr: text (decisions at DEBUG, shown with
    --verbose) or JSON lines (everything, decisions included)."""
    import logging

    global _JSON_LOGS
    _JSON_LOGS = log_format == "json"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if _JSON_LOGS
                         else logging.Formatter("courtly: %(levelname)s: %(message)s"))
    root = logging.getLogger("courtly")
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if (_JSON_LOGS or verbose) else logging.INFO)
    root.propagate = False


class _JsonFormatter:
    """One JSON object per record: at, level, logger, message, and the record's
    extra fields (event, crawl_id, url, reason, detail, ...)."""

    _STANDARD: frozenset[str] = frozenset()

    def format(self, record) -> str:
        import logging

        if not self._STANDARD:
            _JsonFormatter._STANDARD = frozenset(
                logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
        out = {"at": record.created, "level": record.levelname.lower(), "logger": record.name,
               "message": record.getMessage()}
        for k, v in record.__dict__.items():
            if k not in self._STANDARD and not k.startswith("_"):
                out[k] = v
        if record.exc_info:
            out["exc"] = logging.Formatter().formatException(record.exc_info)
        return json.dumps(out, default=str)


def say(message: str, level: str = "info") -> None:
    """A line for the operator on stderr: `courtly: ...` as text, or a log
    record in JSON mode (so stderr stays one JSON object per line)."""
    import logging

    if _JSON_LOGS:
        getattr(logging.getLogger("courtly"), level)(message)
    elif level == "error":
        print(f"courtly: error: {message}", file=sys.stderr)
    elif level == "warning":
        print(f"courtly: WARNING: {message}", file=sys.stderr)
    else:
        print(f"courtly: {message}", file=sys.stderr)
