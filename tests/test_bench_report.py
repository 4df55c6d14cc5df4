"""bench/_report.py: the verdicts, the spread's printing and the one table `make bench` ends with, on synthetic
figures; and `python -m bench.run --quick --only validate` exiting 0 with that table printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from bench import _report as report
from bench import run
from bench._report import GOALS, Direction, Goal, Row, Spread, Verdict, verdict
from tests.compiled import compiled_modules

ROOT = Path(__file__).resolve().parents[1]
AT_MOST = Goal("bench.x", "x / bare", Direction.AT_MOST, 1.5, "x", "the bare calls plus the fsyncs", "test")
AT_LEAST = Goal("bench.y", "y/s", Direction.AT_LEAST, 10_000, "/s", "the parse alone", "test")
OF_FLOOR = Goal("bench.z", "z / bare", Direction.AT_MOST, 1.2, "x", "the bare call plus the fsync", "t", of_floor=True)


def test_an_at_most_goal_under_its_floor_is_a_bench_error_whatever_the_figure() -> None:
    assert verdict(AT_MOST, figure=1.0, floor=1.6) is Verdict.ERROR
    assert verdict(AT_MOST, figure=9.0, floor=1.6) is Verdict.ERROR


def test_an_at_least_goal_over_its_ceiling_is_a_bench_error_whatever_the_figure() -> None:
    assert verdict(AT_LEAST, figure=12_000, floor=9_000) is Verdict.ERROR


def test_met_and_not_met_follow_the_goals_direction_when_the_floor_allows_the_goal() -> None:
    assert verdict(AT_MOST, figure=1.4, floor=1.2) is Verdict.MET
    assert verdict(AT_MOST, figure=1.5, floor=1.2) is Verdict.MET
    assert verdict(AT_MOST, figure=1.6, floor=1.2) is Verdict.NOT_MET
    assert verdict(AT_LEAST, figure=10_500, floor=30_000) is Verdict.MET
    assert verdict(AT_LEAST, figure=9_500, floor=30_000) is Verdict.NOT_MET
    assert verdict(AT_MOST, figure=0.9, floor=None) is Verdict.MET  # a goal with a baseline only, no floor


def test_a_goal_relative_to_its_floor_compares_figure_over_floor_and_fails_closed_without_a_floor() -> None:
    assert verdict(OF_FLOOR, figure=2.3, floor=2.0) is Verdict.MET  # 1.15x the floor
    assert verdict(OF_FLOOR, figure=2.5, floor=2.0) is Verdict.NOT_MET  # 1.25x the floor
    assert verdict(OF_FLOOR, figure=2.3, floor=None) is Verdict.ERROR
    under = Goal("bench.z", "z", Direction.AT_MOST, 0.9, "x", "its floor", "t", of_floor=True)
    assert verdict(under, figure=0.5, floor=1.0) is Verdict.ERROR  # at most 0.9x a floor: under the floor


def test_every_goal_says_where_its_floor_comes_from_or_that_it_has_none() -> None:
    for key, goal in GOALS.items():
        assert goal.bench.startswith("bench."), key
        assert goal.floor_from is None or len(goal.floor_from) > 20, key
    assert {"trip_latency", "coordinator_cpu", "in_process", "gated_call", "journal_proxy", "hatp_verify"} <= set(GOALS)


def test_a_wide_spread_prints_two_significant_digits_and_a_narrow_one_three() -> None:
    assert Spread.of([0.00151, 0.00198, 0.00331]).show(1e3, "ms") == "2.0 (1.5-3.3) ms"
    assert Spread.of([1.234, 1.236, 1.241]).show() == "1.24 (1.23-1.24)"
    assert Spread.of([12_345.0]).show(unit="/s") == "12,300 /s"


def test_the_table_shows_each_goal_beside_its_floor_with_its_verdict_and_the_goals_not_run() -> None:
    met = Row("full_plans", Spread.of([12_000, 12_500, 11_900]), Spread.of([31_000, 31_300]), (1.0, 2.0, 3.0))
    missed = Row("gated_call", Spread.of([1.9, 2.1]), Spread.of([1.25, 1.3]), (4.0, 3.0, 2.0))
    assert met.verdict is Verdict.MET and missed.verdict is Verdict.NOT_MET  # 2.0 / 1.275 over 1.2x the floor
    text = report.table([met, missed], missing=[("cli_start", "no bench yet")])
    lines = text.splitlines()
    assert lines[0].split() == ["bench", "figure", "goal", "floor", "ratio", "verdict", "load", "note"]
    assert "bench.validate" in lines[2] and "12,000 (11,900-12,500)" in lines[2] and " met " in lines[2]
    assert "1.0/2.0/3.0" in lines[2] and ">= 10,000/s" in lines[2] and "0.39" in lines[2]
    assert "bench.gated" in lines[3] and "<= 1.2x floor" in lines[3] and "1.6" in lines[3] and "NOT met" in lines[3]
    assert "bench.cli" in lines[4] and "no bench yet" in lines[4]


def test_a_goal_under_the_floor_its_run_computed_makes_bench_run_exit_non_zero(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(run, "names", lambda: [])
    report.clear()
    assert run.main([]) == 0
    monkeypatch.setattr(report, "clear", lambda: None)
    report.record("trip_latency", 1.4, 1.7)  # the replay and its fsyncs already 1.7x the bare calls: goal 1.5x
    assert run.main([]) == 1
    out = capsys.readouterr()
    assert "ERROR (goal beyond floor)" in out.out and "trip_latency" in out.err
    report.clear()


def test_the_fsync_cost_is_measured_in_the_directory_given(tmp_path: Path) -> None:
    spread = report.fsync_cost(tmp_path, n=3)
    assert len(spread.samples) == 3 and spread.low > 0
    assert list(tmp_path.iterdir()) == []


def test_the_build_names_every_module_setup_py_compiles_by_the_tests_own_check() -> None:
    leaves = [name.rpartition(".")[2] for name in compiled_modules()]
    assert "canonical" in leaves and "saga_rules" in leaves
    states = {"saga_view": "compiled", "saga_rules": "Python", "canonical": "stale"}
    with mock.patch("tests.compiled.build_state", lambda m: states.get(m.__name__.rpartition(".")[2], "compiled")):
        mixed = report.build()
    assert mixed.startswith("compiled (mypyc): saga_view") and "; Python: saga_rules" in mixed
    assert "; older than the source: canonical" in mixed
    with mock.patch("tests.compiled.build_state", lambda m: "compiled"):
        assert report.build() == "compiled (mypyc): " + " ".join(leaves)


def test_bench_run_quick_on_validate_exits_0_and_prints_the_table() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick", "--only", "validate"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"at start, {report.build()}, fsync" in done.stdout
    assert "fsync" in done.stdout and "at end" in done.stdout
    table = done.stdout.split("== goals")[1]
    assert "bench.validate" in table and "full plans/s by CPU" in table
    assert any(v in table for v in (" met ", "NOT met")) and "not run" in table


def test_a_bench_run_alone_prints_the_machine_and_its_goals_and_fails_on_a_goal_beyond_its_floor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report.clear()
    assert report.alone("synthetic", lambda: (report.record("full_plans", 12_000, 30_000), 0)[1]) == 0
    out = capsys.readouterr().out
    assert "[synthetic] load" in out and "fsync" in out and "at end" in out and "bench.validate" in out
    report.clear()
    assert report.alone("synthetic", lambda: (report.record("full_plans", 12_000, 9_000), 0)[1]) == 1
    assert "ERROR (goal beyond floor)" in capsys.readouterr().out
    report.clear()
