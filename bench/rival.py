"""What the other crawlers' scripts share: their command line and the simulated web's host map.

bench/rival_scrapy.py and bench/rival_crawlee.py take the same arguments
(`parse_args`) from bench/compare.py, and map names to addresses with
`load_hosts`: the simulated web's hosts file, keeping only the addresses that
lie inside the allowed networks of its manifest (the SSRF bait name, which
points at 127.0.0.1, is left out).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
from pathlib import Path

__all__ = ["parse_args", "load_hosts", "read_seeds"]


def parse_args(doc: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--seeds", required=True, help="file with one seed URL a line")
    ap.add_argument("--hosts-file", required=True, help="the simulated web's hosts.json")
    ap.add_argument("--allowed", required=True, help="JSON list of allowed networks")
    ap.add_argument("--max-pages", type=int, required=True, help="stop after this many HTML pages")
    ap.add_argument("--delay-s", type=float, default=0.0, help="delay between requests to one host")
    ap.add_argument("--concurrency", type=int, default=256, help="requests in flight at most, all hosts together")
    return ap.parse_args()


def load_hosts(hosts_file: str, allowed: list[str]) -> dict[str, str]:
    """name -> IP from the hosts file, keeping only addresses inside `allowed`."""
    nets = [ipaddress.ip_network(n) for n in allowed]
    hosts = json.loads(Path(hosts_file).read_text())
    return {name.lower(): ip for name, ip in hosts.items() if any(ipaddress.ip_address(ip) in n for n in nets)}


def read_seeds(path: str) -> list[str]:
    return [s for s in Path(path).read_text().split() if s]
