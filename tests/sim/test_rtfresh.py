"""Freshness from the real runtime (sim/rtfresh.py, what `courtly sim` runs):
the real Crawler recrawls the model web in virtual time, with conditional
requests."""

from __future__ import annotations

from courtly.sim.rtfresh import runtime_figures
from courtly.sim.virtual import SimParams
from courtly.sim.vsim_command import main

SMALL = SimParams(seed=3, days=0.5, pages=150, hosts=6, budget=600, period_s=300.0, warmup_days=0.0)


def test_the_real_runtime_recrawls_the_model_web_with_conditional_requests():
    row, f = runtime_figures(SMALL)
    assert f.fetches > SMALL.pages          # every page discovered once, then recrawled
    assert f.not_modified > 0               # If-None-Match sent and answered 304
    assert 0.0 < row.freshness <= 1.0 and 0.0 < row.freshness_w <= 1.0
    assert row.name == "courtly"


def test_the_same_params_give_the_same_runtime_figures():
    a, fa = runtime_figures(SMALL)
    b, fb = runtime_figures(SMALL)
    assert a == b and (fa.fetches, fa.not_modified) == (fb.fetches, fb.not_modified)


def test_the_runtime_flag_of_old_scripts_is_accepted_and_changes_nothing(capsys):
    args = ["--seed", "3", "--days", "0.5", "--pages", "150", "--hosts", "6", "--budget", "600"]
    assert main(args) == 0
    plain = capsys.readouterr().out
    assert main([*args, "--runtime"]) == 0
    table = [line for line in plain.splitlines() if not line.startswith("run time")]
    assert table == [line for line in capsys.readouterr().out.splitlines() if not line.startswith("run time")]
