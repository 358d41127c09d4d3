"""courtly.sim: the simulated web on loopback and its checkers (see docs/simweb.md).

Public names are loaded lazily, so importing `courtly.sim` (or a sibling
module such as a virtual clock) does not pull in aiohttp.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SimWebConfig": "courtly.sim.webconfig",
    "profile_config": "courtly.sim.webconfig",
    "PROFILES": "courtly.sim.webconfig",
    "BEHAVIOURS": "courtly.sim.webconfig",
    "ROBOTS_VARIANTS": "courtly.sim.webconfig",
    "SimWeb": "courtly.sim.model",
    "HostSpec": "courtly.sim.model",
    "registered_domain": "courtly.sim.model",
    "SimWebServer": "courtly.sim.server",
    "LogRecord": "courtly.sim.reqlog",
    "load_log": "courtly.sim.reqlog",
    "CheckParams": "courtly.sim.check",
    "CheckReport": "courtly.sim.check",
    "Violation": "courtly.sim.check",
    "check_log": "courtly.sim.check",
    "RobotsRules": "courtly.sim.robotsrule",
    "web_from_manifest": "courtly.sim.manifest",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'courtly.sim' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
