"""What trees should add over chains by auto's arithmetic (spec.tree_estimate): hand-built costs and rates."""

import pandas as pd

from spec.bench.tree_estimate import estimate, slot_rates, table, with_row_cost
from spec.loop.autodraft import Costs, choose
from spec.loop.slots import by_method_and_domain


def costs(row_share: float, second=(0.3, 0.2), tree_ms: float = 0.0) -> Costs:
    """A head of 6 drafts; a plain step 100 ms, each verified row `row_share` of it, drafting 10 ms."""
    return Costs([100.0 * (1 + row_share * k) for k in range(7)], [0.0] + [10.0] * 6, [0.5] * 6, list(second), tree_ms)


def test_slot_rates_carry_the_last_measured_rate_past_the_slots_never_reached():
    rows = [{"slot": 1, "reached": 10, "landed": 6}, {"slot": 2, "reached": 6, "landed": 3},
            {"slot": 3, "reached": 0, "landed": 0}]
    assert slot_rates(rows, 4) == [0.6, 0.5, 0.5, 0.5]
    assert slot_rates([], 2) == [0.0, 0.0]


def test_the_chain_it_compares_with_is_the_one_auto_would_choose():
    first = [0.7, 0.6, 0.5, 0.4, 0.3, 0.2]
    for share in (0.2, 0.07, 0.01):
        c = costs(share)
        assert estimate(c, first, c.second).chain_k == choose(c, first, 6)


def test_cheap_rows_and_good_second_guesses_make_trees_pay_and_dear_rows_do_not():
    first = [0.5] * 6
    cheap, dear = costs(0.01, second=(0.4, 0.3)), costs(0.2, second=(0.4, 0.3))
    assert estimate(cheap, first, cheap.second).gain > 1.05 and estimate(cheap, first, cheap.second).tree_n > 1
    got = estimate(dear, first, dear.second)
    assert got.gain == 1.0 and got.tree_n == 0  # no tree beats the chain: the chain stays
    blind = costs(0.01, second=(0.0, 0.0))
    assert estimate(blind, first, blind.second).tree_n == 0  # second guesses that never land add only rows
    assert estimate(cheap, first, []).gain == 1.0  # no second-choice rates measured: chains only
    taxed = costs(0.01, second=(0.4, 0.3), tree_ms=1000.0)
    assert estimate(taxed, first, taxed.second).tree_n == 0  # a tree's own cost counts


def test_row_costs_rescale_the_verify_only():
    c = costs(0.2)
    cheap = with_row_cost(c, 0.01)
    assert cheap.verify[0] == c.verify[0] and abs(cheap.verify[6] - 106.0) < 1e-9 and cheap.draft == c.draft
    assert with_row_cost(c, None) is c


def test_the_table_reads_each_heads_full_chain_rows_per_domain():
    runs = pd.DataFrame([
        {"domain": "code", "method": "DFlash full (15)", "reached": "4 2", "landed": "2 1"},
        {"domain": "code", "method": "DFlash full (15)", "reached": "4 2", "landed": "2 0"},
        {"domain": "code", "method": "DFlash tree (15)", "reached": "4 3", "landed": "3 2"},  # not a chain: left out
        {"domain": "code", "method": "greedy (ours)", "reached": "", "landed": ""},
    ])
    rows = table(by_method_and_domain(runs), {"dflash": costs(0.05)})
    assert len(rows) == 1 and rows[0]["head"] == "DFlash" and rows[0]["domain"] == "code"
    assert rows[0]["slot 1"] == 0.5 and rows[0]["2nd choice"] == 0.3
    assert rows[0]["rows at 1%"].startswith("chain ")


def test_the_rounds_are_timed_on_both_heads_of_a_tiny_pair(tiny_dir):
    from spec.bench.tree_estimate import round_kinds
    from spec.heads.registry import load_dflash, load_dspark
    from spec.target import load_target

    t = load_target(str(tiny_dir / "qwen3"))
    for head in (load_dflash(str(tiny_dir / "dflash-qwen3"), t), load_dspark(str(tiny_dir / "dspark-qwen3"), t)):
        ms = round_kinds(t, head, runs=2)
        assert list(ms) == ["chain", "chain, synced", "tree"] and min(ms.values()) > 0


def test_a_file_that_is_not_a_bench_run_gets_one_line_and_loads_no_model(tmp_path, capsys):
    from spec.bench.main import main

    missing, foreign = tmp_path / "none.csv", tmp_path / "foreign.csv"
    foreign.write_text("reached,landed\n1,1\n")
    assert main(["tree-estimate", str(missing)]) == 2
    assert main(["tree-estimate", str(foreign)]) == 2
    chains_only = tmp_path / "auto.csv"
    chains_only.write_text("domain,method,reached,landed\ncode,DFlash auto,4 2,2 1\n")
    assert main(["tree-estimate", str(chains_only)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "none.csv" in err[0] and "no column 'method'" in err[1] and "full,tree" in err[2], err


def test_the_old_spelling_still_runs_the_estimate_and_names_the_new_one(tmp_path, capsys):
    from spec.bench.main import main

    assert main(["--tree-estimate", str(tmp_path / "none.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == f"note: --tree-estimate is deprecated, use: python -m spec bench tree-estimate {tmp_path}/none.csv"
    assert len(err) == 2 and "cannot read" in err[1] and "none.csv" in err[1], err
