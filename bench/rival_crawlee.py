"""Crawlee for Python, configured for a polite broad crawl of the simulated web (run by bench/compare.py).

    python bench/rival_crawlee.py --seeds S --hosts-file H --allowed '["127.0.1.0/24"]' \\
        --max-pages 20000 --delay-s 0 --concurrency 256

ParselCrawler (lxml parsing) with `respect_robots_txt_file=True`,
`max_requests_per_crawl` = `--max-pages` (robots.txt is fetched outside the
request queue, so it is not counted), no retries (`max_request_retries=0`),
a fixed pool of `--concurrency` tasks (min = desired = max, so the autoscaler
does not shrink it because of other load on this shared machine), in-memory
storage (no request files on disk), and `enqueue_links(strategy="all")`.

Per-host politeness: Crawlee for Python has no per-host concurrency limit
(crawlee-python issue #1263: concurrency is global). Its documented per-domain
mechanism is the `ThrottlingRequestManager` ("Request throttling" guide):
with `--delay-s` > 0 every simulated host is registered with it and given
`set_crawl_delay(delay)`, so requests to a host are dispatched at least the
delay apart. With no delay there is nothing to configure, and overlapping
requests to one host show up as violations.

Two adaptations, both needed to crawl the simulated web at all:
- Names: the default client (impit, Rust) cannot be given a hosts map, so the
  documented `CurlImpersonateHttpClient` is used with curl's RESOLVE option
  (name:port:ip for every host of the hosts file inside the allowed networks)
  and `max_clients` = `--concurrency` (curl_cffi's default is 10 handles);
  links to any other name are skipped by `transform_request_function`, so
  curl never asks a real resolver.
- Robots: Crawlee checks robots.txt for the `*` group only; `RobotsTxtFile`
  is patched here to check the "courtly" group, the one courtly and Scrapy
  (ROBOTSTXT_USER_AGENT) obey, so the three crawl the same allowed pages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import timedelta
from urllib.parse import urlsplit

from crawlee import ConcurrencySettings
from crawlee._utils.robots import RobotsTxtFile
from crawlee.crawlers import ParselCrawler, ParselCrawlingContext
from crawlee.http_clients import CurlImpersonateHttpClient
from crawlee.request_loaders import ThrottlingRequestManager
from crawlee.storage_clients import MemoryStorageClient
from crawlee.storages import RequestQueue
from curl_cffi import CurlOpt

from rival import load_hosts, parse_args, read_seeds

ROBOTS_TOKEN = "courtly"
_is_allowed, _crawl_delay = RobotsTxtFile.is_allowed, RobotsTxtFile.get_crawl_delay


def _is_allowed_for_token(self, url: str, user_agent: str = ROBOTS_TOKEN) -> bool:  # type: ignore[no-untyped-def]
    return _is_allowed(self, url, ROBOTS_TOKEN if user_agent == "*" else user_agent)


def _crawl_delay_for_token(self, user_agent: str = ROBOTS_TOKEN):  # type: ignore[no-untyped-def]
    return _crawl_delay(self, ROBOTS_TOKEN if user_agent == "*" else user_agent)


RobotsTxtFile.is_allowed = _is_allowed_for_token  # type: ignore[method-assign]
RobotsTxtFile.get_crawl_delay = _crawl_delay_for_token  # type: ignore[method-assign]


async def crawl(args: argparse.Namespace) -> None:
    seeds = read_seeds(args.seeds)
    hosts = load_hosts(args.hosts_file, json.loads(args.allowed))
    port = urlsplit(seeds[0]).port or 80
    client = CurlImpersonateHttpClient(
        curl_options={CurlOpt.RESOLVE: [f"{name}:{port}:{ip}" for name, ip in hosts.items()]},
        max_clients=args.concurrency,
    )
    storage = MemoryStorageClient()
    queue = await RequestQueue.open(storage_client=storage)
    manager = queue
    if args.delay_s > 0:
        manager = ThrottlingRequestManager(queue, domains=sorted(hosts), request_manager_opener=RequestQueue.open,
                                           base_delay=timedelta(seconds=args.delay_s))
        for name in hosts:
            manager.set_crawl_delay(f"http://{name}/", args.delay_s)  # type: ignore[arg-type]
    crawler = ParselCrawler(
        http_client=client,
        storage_client=storage,
        request_manager=manager,
        respect_robots_txt_file=True,
        max_requests_per_crawl=args.max_pages,
        max_request_retries=0,
        concurrency_settings=ConcurrencySettings(min_concurrency=args.concurrency,
                                                 desired_concurrency=args.concurrency,
                                                 max_concurrency=args.concurrency),
    )

    def only_simweb(options):  # type: ignore[no-untyped-def]
        host = (urlsplit(options["url"]).hostname or "").lower()
        return "unchanged" if host in hosts else "skip"

    @crawler.router.default_handler
    async def follow(context: ParselCrawlingContext) -> None:
        await context.enqueue_links(strategy="all", transform_request_function=only_simweb)

    await crawler.run(seeds)


def main() -> int:
    args = parse_args(__doc__)
    asyncio.run(crawl(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
