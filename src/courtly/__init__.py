"""courtly: a polite, host-partitioned web crawler."""

__version__ = "0.1.0"
