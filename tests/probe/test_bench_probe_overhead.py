"""bench/probe_overhead.py keeps its contract with `make bench`: run() returns the numbers, main() never fails."""

from __future__ import annotations

from bench import probe_overhead


def test_given_a_tiny_run_when_benchmarking_then_the_numbers_come_back_as_a_dict():
    result = probe_overhead.run(calls=2_000, repeats=1)

    assert result["benchmark"] == "probe_overhead"
    assert result["calls"] == 2_000 and result["repeats"] == 1
    # step_ns is net of the empty loop: on a loaded machine it may come out below zero; the call's total cannot
    assert isinstance(result["step_ns"], float) and result["empty_loop_ns"] > 0
    assert result["step_ns"] + result["empty_loop_ns"] > 0
    assert probe_overhead.row(result).startswith("| probe.step() |")


def test_given_the_probe_breaks_when_the_bench_runs_then_it_still_exits_zero(monkeypatch, capsys):
    def broken(**kwargs):
        raise RuntimeError("no probe")

    monkeypatch.setattr(probe_overhead, "run", broken)

    assert probe_overhead.main() == 0
    assert "error: RuntimeError" in capsys.readouterr().out
