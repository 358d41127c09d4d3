"""Strict TOML config: unknown keys and wrong types are errors naming them."""

import pytest

from courtly.config import Config, ConfigError, config_from_dict, load_config


def test_defaults_are_polite():
    c = Config()
    assert c.politeness.delay_s >= 1.0
    assert c.politeness.ip_concurrency == 4 and c.politeness.ip_rate == 5.0
    assert c.robots.cache_s <= 86400
    assert c.fetch.redirects_max == 5
    assert c.crawl.depth_max == 16


def test_unknown_key_is_named():
    with pytest.raises(ConfigError, match=r"crawl\.max_page\b"):
        config_from_dict({"crawl": {"max_page": 3}})


def test_unknown_section_is_named():
    with pytest.raises(ConfigError, match=r"\[polite\]"):
        config_from_dict({"polite": {}})


def test_wrong_type_is_named():
    with pytest.raises(ConfigError, match="politeness.delay_s must be a number"):
        config_from_dict({"politeness": {"delay_s": "fast"}})
    with pytest.raises(ConfigError, match="crawl.max_pages must be an integer"):
        config_from_dict({"crawl": {"max_pages": True}})


def test_bad_values_are_refused():
    with pytest.raises(ConfigError):
        config_from_dict({"crawl": {"intent": "scrape"}})
    with pytest.raises(ConfigError):
        config_from_dict({"robots": {"cache_s": 172800}})
    with pytest.raises(ConfigError):
        config_from_dict({"politeness": {"ip_concurrency": 0}})
    with pytest.raises(ConfigError, match=r"extract\.tasks_per_child"):
        config_from_dict({"extract": {"tasks_per_child": 0}})


@pytest.mark.parametrize("token", ["bot2", "Bot Name", "bot/1.0", "b\u00f6t", ""])
def test_robots_token_is_an_rfc9309_product_token(token):
    with pytest.raises(ConfigError, match="robots.token"):
        config_from_dict({"robots": {"token": token}})
    assert config_from_dict({"robots": {"token": "My_Bot-x"}}).robots.token == "My_Bot-x"


def test_toml_file_loads_with_allowlist(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(
        '[crawl]\nintent = "search"\ncontact = "ops@example.org"\n'
        '[politeness]\ndelay_s = 2.0\n'
        '[[politeness.allow]]\nkey = "example.org"\ndelay_s = 0.5\nowner = "ops"\nexpires = "2030-01-01"\n'
        '[network]\nallow = ["127.0.0.0/8"]\n'
    )
    c = load_config(p)
    assert c.crawl.intent == "search" and c.politeness.delay_s == 2.0
    assert c.politeness.allow[0].key == "example.org"
    assert c.politeness.allow[0].expires_at() > 1.8e9
    assert c.network.allow == ("127.0.0.0/8",)


@pytest.mark.parametrize("net", ["10.0.0.0/33", "not-a-network", "10/8", " 10.0.0.0/8", "010.0.0.0/8",
                                 "fe80::/10%eth0", "10.0.0.5/8", "127.0.0.1/8"])
def test_network_allow_is_parsed_strictly(tmp_path, net):
    # a bad entry is a one-line config error naming the key, from the file as
    # from the command line; host bits set ("10.0.0.5/8") are a typo, not /8
    with pytest.raises(ConfigError, match=r"network\.allow\[1\]"):
        config_from_dict({"network": {"allow": ["127.0.1.0/24", net]}})
    p = tmp_path / "c.toml"
    p.write_text(f'[network]\nallow = ["127.0.1.0/24", "{net}"]\n')
    with pytest.raises(ConfigError, match="network.allow"):
        load_config(p)
    with pytest.raises(ConfigError, match="network.allow"):
        Config().replace("network", allow=("127.0.1.0/24", net))
    assert config_from_dict({"network": {"allow": ["10.0.0.0/8", "127.0.0.1", "fd00::/8"]}}).network.allow


def test_invalid_toml_is_a_config_error(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[crawl\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(p)
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.toml")


def test_impolite_settings_warn_unless_only_loopback():
    fast = config_from_dict({"politeness": {"delay_s": 0.1}})
    assert any("IMPOLITE" in w for w in fast.warnings())
    local = config_from_dict({"politeness": {"delay_s": 0.1}, "network": {"allow": ["127.0.0.0/8"]},
                              "crawl": {"contact": "me@example.org"}})
    assert not any("IMPOLITE" in w for w in local.warnings())
    assert any("contact" in w for w in Config().warnings())


def test_fetch_connections_fit_the_open_files_limit(monkeypatch, caplog):
    import resource

    from courtly.runtime import wiring

    limits = {"now": (1024, 4096)}
    monkeypatch.setattr(resource, "getrlimit", lambda what: limits["now"])
    monkeypatch.setattr(resource, "setrlimit", lambda what, lim: limits.update(now=lim))
    assert wiring.connections_that_fit(2048) == 2048          # soft limit raised under the hard one
    assert limits["now"] == (2048 + wiring.FILES_RESERVED, 4096)
    limits["now"] = (1024, 1024)
    with caplog.at_level("WARNING", logger="courtly"):
        assert wiring.connections_that_fit(2048) == 1024 - wiring.FILES_RESERVED   # shrunk to fit
    assert "does not fit the open-files limit" in caplog.text
    with pytest.raises(ConfigError, match="connections_max"):
        Config().replace("fetch", connections_max=0)


@pytest.mark.parametrize("section, key, value, message", [
    ("politeness", "delay_s", float("nan"), "politeness.delay_s must be a finite number, not nan"),
    ("fetch", "total_s", float("inf"), "fetch.total_s must be a finite number"),
    ("politeness", "crawl_delay_s_max", -1.0, "politeness.crawl_delay_s_max must be >= 0"),
    ("politeness", "response_factor", -2.0, "politeness.response_factor must be >= 0"),
    ("fetch", "decoded_bytes_max", 0, "fetch.decoded_bytes_max must be > 0"),
    ("fetch", "header_bytes_max", -1, "fetch.header_bytes_max must be > 0"),
    ("robots", "retry_s_min", 0.0, "robots.retry_s_min must be > 0"),
    ("robots", "retry_s_max", 1.0, "robots.retry_s_max must be >= robots.retry_s_min"),
    ("crawl", "lease_s", 0.0, "crawl.lease_s must be > 0"),
    ("crawl", "contact", "ops@example.org\r\nX-Evil: 1", "crawl.contact must be one line"),
    ("crawl", "user_agent", "bot\n", "crawl.user_agent must be one line"),
    ("warc", "prefix", "../elsewhere", "warc.prefix may hold letters"),
    ("warc", "prefix", "", "warc.prefix may hold letters"),
    ("warc", "file_bytes_max", 0, "warc.file_bytes_max must be > 0"),
    ("extract", "workers", 0, "extract.workers must be > 0"),
    ("extract", "task_s_max", 0.0, "extract.task_s_max must be > 0"),
    ("extract", "memory_bytes_max", -5, "extract.memory_bytes_max must be > 0"),
    ("extract", "links_max", 0, "extract.links_max must be > 0"),
    ("store", "commit_interval_s", 0.0, "store.commit_interval_s must be > 0"),
])
def test_a_value_that_cannot_work_is_a_config_error_naming_it(section, key, value, message):
    """Each used to pass the config and fail later: a traceback once the crawl
    folder was made (extract.workers = 0, warc.*, a header with a line break),
    a commit loop spinning on a core (commit_interval_s = 0), or a crawl whose
    NaN delay passed every politeness comparison."""
    with pytest.raises(ConfigError) as e:
        config_from_dict({section: {key: value}})
    assert message in str(e.value)


def test_cli_overrides_are_checked_like_the_file():
    with pytest.raises(ConfigError, match="politeness.delay_s must be a finite number"):
        Config().replace("politeness", delay_s=float("nan"))
    with pytest.raises(ConfigError, match="crawl.duration_s must be a finite number"):
        Config().replace("crawl", duration_s=float("nan"))


def test_a_missing_required_key_is_named():
    with pytest.raises(ConfigError, match=r"^politeness\.allow\[0\] needs delay_s, owner, expires$"):
        config_from_dict({"politeness": {"allow": [{"key": "example.org"}]}})
    with pytest.raises(ConfigError, match=r"politeness.allow example.org delay_s must be >= 0"):
        config_from_dict({"politeness": {"allow": [{"key": "example.org", "delay_s": -1.0, "owner": "o",
                                                    "expires": "2030-01-01"}]}})
