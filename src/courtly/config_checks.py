"""The configuration's error and the value checks its sections run in
`__post_init__` (config.py and config_services.py): each names the key it
refuses, for a one-line error message."""

from __future__ import annotations

import ipaddress
import math
import typing

__all__ = ["ConfigError", "check_networks"]


class ConfigError(ValueError):
    """A configuration problem, phrased for a one-line error message."""


def check_networks(name: str, nets: typing.Iterable[str]) -> None:
    """Raise ConfigError unless each of `nets` is an IP network (CIDR) with no
    host bits set, or one address. Strict because each entry opens non-public
    addresses to attacker-chosen links: "10.0.0.5/8" is a typo to point out,
    not all of 10.0.0.0/8."""
    for i, net in enumerate(nets):
        try:
            if not isinstance(net, str):
                raise ValueError("not a string")
            ipaddress.ip_network(net)
        except ValueError as e:
            hint = ""
            try:
                hint = f" (did you mean {ipaddress.ip_network(net, strict=False)}?)"
            except (ValueError, TypeError):
                pass
            raise ConfigError(f"{name}[{i}]: {net!r} is not a network such as 10.1.0.0/16: {e}{hint}") from None


def _positive(name: str, v: float) -> None:
    _finite(name, v)
    if v <= 0:
        raise ConfigError(f"{name} must be > 0, not {v}")


def _non_negative(name: str, v: float) -> None:
    _finite(name, v)
    if v < 0:
        raise ConfigError(f"{name} must be >= 0, not {v}")


def _finite(name: str, v: float) -> None:
    """NaN passes every comparison test (a NaN delay_s was a crawl without delay)."""
    if isinstance(v, float) and not math.isfinite(v):
        raise ConfigError(f"{name} must be a finite number, not {v}")
