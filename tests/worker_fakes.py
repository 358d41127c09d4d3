"""Fakes of the cluster store for Worker unit tests (no PostgreSQL).

`OneRegionStore` answers what a Worker asks of its store at construction:
the partition count, the region's partition range (None: one region, every
partition) and a key's partition (hash mod partitions, as without regions).
Tests subclass it to add the calls they exercise."""

from __future__ import annotations

from courtly.core.sitekey import partition_of


class OneRegionStore:
    partitions = 8

    def region_range(self) -> None:
        return None

    def partition_of_key(self, key: str) -> int:
        return partition_of(key, self.partitions)
