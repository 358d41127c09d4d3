"""A crawl folder records the URL normalisation rules it was made with
(NORMALIZATION_VERSION and the [urls] keys), and a resume under other rules
is refused with one line, before anything is written. `urls.keep_params_hosts`
is accepted by the config and keeps those hosts' query parameters in a crawl.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest
from cli_support import courtly_logger_restored
from inproc_support import crawler
from pg_support import pg_fixture

from courtly.cli import main
from courtly.config import Config, config_from_dict, load_config
from courtly.core.urls import NORMALIZATION_VERSION
from courtly.runtime.normalization import META_KEY, RulesChanged
from courtly.shell.store.sqlite import SqliteStore

postgres = pg_fixture("module")


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def _resume(out, *extra: str) -> int:
    """`courtly crawl` on a crawl folder with nothing queued: it records, checks, and ends."""
    return main(["crawl", "--out", str(out), "--quiet", "--contact", "t@example.org", *extra])


def _meta(out) -> dict:
    db = sqlite3.connect(out / "crawl.db")
    try:
        return json.loads(db.execute("SELECT v FROM meta WHERE k = ?", (META_KEY,)).fetchone()[0])
    finally:
        db.close()


def _set_meta(out, value: dict) -> None:
    db = sqlite3.connect(out / "crawl.db")
    with db:
        db.execute("UPDATE meta SET v = ? WHERE k = ?", (json.dumps(value), META_KEY))
    db.close()


@pytest.fixture
def folder(tmp_path):
    out = tmp_path / "crawl"
    out.mkdir()
    SqliteStore(out / "crawl.db").close()
    return out


def test_a_crawl_records_its_normalisation_version_and_rules(folder):
    assert _resume(folder) == 0
    meta = _meta(folder)
    assert meta["version"] == NORMALIZATION_VERSION
    assert "utm_" in meta["strip_param_prefixes"] and "gclid" in meta["strip_params"]
    assert _resume(folder) == 0                      # the same rules resume


def test_a_resume_under_another_normalisation_version_is_refused_in_one_line(folder, capsys):
    assert _resume(folder) == 0
    _set_meta(folder, {**_meta(folder), "version": NORMALIZATION_VERSION - 1})
    (folder / "config.json").unlink()
    capsys.readouterr()
    assert _resume(folder) == 2
    err = capsys.readouterr().err
    assert err.startswith("courtly: error: ") and err.count("\n") == 1, err
    assert f"NORMALIZATION_VERSION {NORMALIZATION_VERSION - 1} -> {NORMALIZATION_VERSION}" in err
    assert not (folder / "config.json").exists()     # refused before anything was written


def test_a_resume_with_other_url_rules_in_the_config_is_refused_naming_them(folder, tmp_path, capsys):
    assert _resume(folder) == 0
    cfg = tmp_path / "c.toml"
    cfg.write_text('[urls]\nstrip_params = ["ref"]\nkeep_params_hosts = ["a.example"]\n')
    capsys.readouterr()
    assert _resume(folder, "--config", str(cfg)) == 2
    err = capsys.readouterr().err
    assert "urls.strip_params +ref" in err and "urls.keep_params_hosts +a.example" in err, err


def test_keep_params_hosts_is_accepted_and_keeps_every_query_parameter_of_those_hosts(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('[urls]\nkeep_params_hosts = ["A.example"]\n')
    cfg = load_config(toml)
    assert cfg.urls.keep_params_hosts == ("A.example",)
    c = crawler(tmp_path, cfg)
    c.add_seeds(["https://www.a.example/p?utm_source=x&sid=7", "https://b.example/p?utm_source=x&sid=7&q=1"])
    c.commit()
    urls = sorted(u for (u,) in c.store._db.execute("SELECT url FROM urls"))
    assert urls == ["https://b.example/p?q=1", "https://www.a.example/p?sid=7&utm_source=x"]


def test_distributed_workers_keep_the_rules_the_crawl_was_made_with(postgres):
    from courtly.runtime.cluster import same_rules
    from courtly.shell.store.postgres import PostgresStore

    async def body():
        store = await PostgresStore.open(postgres.create_database(), partitions=4)
        try:
            await same_rules(store, Config())                        # the first worker records them
            recorded = json.loads(await store.get_meta(META_KEY))
            await same_rules(store, Config())                        # the same rules: welcome
            with pytest.raises(RulesChanged, match=r"urls.strip_params \+ref"):
                await same_rules(store, config_from_dict({"urls": {"strip_params": ["ref"]}}))
            return recorded
        finally:
            await store.close()

    assert asyncio.run(asyncio.wait_for(body(), 60))["version"] == NORMALIZATION_VERSION
