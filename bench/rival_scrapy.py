"""Scrapy, configured for a polite broad crawl of the simulated web (run by bench/compare.py).

    python bench/rival_scrapy.py --seeds S --hosts-file H --allowed '["127.0.1.0/24"]' \\
        --max-pages 20000 --delay-s 0 --concurrency 256

Settings follow Scrapy's "Broad Crawls" page: a high CONCURRENT_REQUESTS,
the DownloaderAwarePriorityQueue scheduler, REACTOR_THREADPOOL_MAXSIZE 20,
LOG_LEVEL INFO, no cookies, no retries, no redirects, DOWNLOAD_TIMEOUT 15,
breadth-first order (DEPTH_PRIORITY 1 with FIFO queues), AutoThrottle off.
Politeness: CONCURRENT_REQUESTS_PER_DOMAIN 1 (every simulated host is its own
domain), DOWNLOAD_DELAY = the scenario's delay with RANDOMIZE_DOWNLOAD_DELAY
off (Scrapy's default jitter waits 0.5x..1.5x the delay, i.e. below it),
ROBOTSTXT_OBEY on with ROBOTSTXT_USER_AGENT "courtly", so Scrapy obeys the
same robots.txt group as courtly (the simulated web writes one group for the
crawler under test; the `*` group asks for Crawl-delay 30, which Scrapy
would ignore anyway).

No item processing: the spider follows every link (LinkExtractor, default
options) and stops itself with CloseSpider after `--max-pages` HTML pages
(CLOSESPIDER_PAGECOUNT would count robots.txt answers as pages too).

Name resolution: the `DNS_RESOLVER` setting points at `HostsFileResolver`,
which answers from the simulated web's hosts file, only for names whose
address lies in the allowed networks, and fails every other name (no
fallback to the system resolver, so nothing leaves loopback).
"""

from __future__ import annotations

import argparse
import json
import sys

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.exceptions import CloseSpider
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor
from twisted.internet import defer
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer

from rival import load_hosts, parse_args, read_seeds


@implementer(IResolverSimple)
class HostsFileResolver:
    """A Scrapy DNS_RESOLVER that answers from the hosts file only (see the module doc)."""

    hosts: dict[str, str] = {}

    def __init__(self, reactor) -> None:  # type: ignore[no-untyped-def]
        self.reactor = reactor

    @classmethod
    def from_crawler(cls, crawler, reactor):  # type: ignore[no-untyped-def]
        resolver = cls(reactor)
        resolver.hosts = load_hosts(crawler.settings.get("BENCH_HOSTS_FILE"),
                                    crawler.settings.getlist("BENCH_ALLOWED_NETWORKS"))
        return resolver

    def install_on_reactor(self) -> None:
        self.reactor.installResolver(self)

    def getHostByName(self, name: str, timeout=()):  # type: ignore[no-untyped-def]  # noqa: N802 (Twisted's name)
        ip = self.hosts.get(name.lower())
        if ip is None:
            return defer.fail(DNSLookupError(f"{name} is not in the simulated web's hosts file"))
        return defer.succeed(ip)


class SimwebSpider(scrapy.Spider):
    name = "simweb"

    def __init__(self, seeds: list[str], max_pages: int, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(**kwargs)
        self.seeds = seeds
        self.max_pages = max_pages
        self.pages = 0
        self.links = LinkExtractor()

    async def start(self):  # type: ignore[no-untyped-def]
        for url in self.seeds:
            yield scrapy.Request(url)

    def parse(self, response):  # type: ignore[no-untyped-def]
        if not isinstance(response, HtmlResponse):
            return
        self.pages += 1
        if self.pages >= self.max_pages:
            raise CloseSpider("max_pages")
        for link in self.links.extract_links(response):
            yield scrapy.Request(link.url)


def settings(args: argparse.Namespace) -> dict[str, object]:
    return {
        # Broad Crawls page
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
        "CONCURRENT_REQUESTS": args.concurrency,
        "REACTOR_THREADPOOL_MAXSIZE": 20,
        "LOG_LEVEL": "INFO",
        "COOKIES_ENABLED": False,
        "RETRY_ENABLED": False,
        "DOWNLOAD_TIMEOUT": 15,
        "REDIRECT_ENABLED": False,
        "DEPTH_PRIORITY": 1,
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        # politeness
        "AUTOTHROTTLE_ENABLED": False,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": args.delay_s,
        "RANDOMIZE_DOWNLOAD_DELAY": False,
        "ROBOTSTXT_OBEY": True,
        "ROBOTSTXT_USER_AGENT": "courtly",
        "USER_AGENT": f"courtly-bench-scrapy/{scrapy.__version__} (+bench@example.invalid)",
        # the simulated web's names
        "DNS_RESOLVER": HostsFileResolver,
        "BENCH_HOSTS_FILE": args.hosts_file,
        "BENCH_ALLOWED_NETWORKS": json.loads(args.allowed),
        "TELNETCONSOLE_ENABLED": False,
    }


def main() -> int:
    args = parse_args(__doc__)
    seeds = read_seeds(args.seeds)
    process = CrawlerProcess(settings(args), install_root_handler=True)
    process.crawl(SimwebSpider, seeds=seeds, max_pages=args.max_pages)
    process.start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
