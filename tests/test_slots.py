"""Per-slot acceptance (spec.slots): counts from hand-built rounds, their agreement with the accept lengths
over real generations (chains, trees, auto), and the same counts in the race's live meters, its outcome,
the API's record and the CLI's table."""

import pytest
import tiny

from spec.heads.registry import load_dflash, load_dspark
from spec.loop.autodraft import Costs
from spec.loop.engine import Engine
from spec.loop.slots import SlotCounts, shares_text, slot_counts, slot_table
from spec.loop.tree import DraftTree
from spec.race.run import run_race
from spec.race.settings import RaceSettings
from spec.target import load_target


def test_counts_from_hand_built_rounds():
    rounds = [
        ((1, 1), (1, 1), (0, 1)),  # a chain of 3 (or more) landing 2: slot 3 reached, missed
        ((0, 1),),  # a chain whose first draft missed
        (),  # a plain step: reaches no slot
        ((2, 3), (1, 2), (1, 1)),  # a tree: landed via the 2nd guess at depth 1, then 2 more, all it drafted
        ((1, 2), (0, 2)),
    ]
    assert slot_counts(rounds) == [{"slot": 1, "reached": 4, "landed": 3}, {"slot": 2, "reached": 3, "landed": 2},
                                   {"slot": 3, "reached": 2, "landed": 1}]
    counts = SlotCounts(rounds)
    assert counts.accepted == 6 and counts.rates() == [0.75, 2 / 3, 0.5]
    assert shares_text(counts.rows()) == "1: 75% (3/4), 2: 67% (2/3), 3: 50% (1/2)"
    merged = SlotCounts()
    merged.add_rows(counts.rows())
    merged.add_rows([{"slot": 4, "reached": 1, "landed": 0}])
    assert merged.reached == [4, 3, 2, 1] and merged.landed == [3, 2, 1, 0]
    assert slot_counts([]) == [] and slot_counts([(), ()]) == []


def test_a_trees_levels_feed_the_same_counts():
    """DraftTree.levels of a committed path: its depths reached, landed where the path went on."""
    tree = DraftTree([11, 12, 13, 14, 15], [0, 0, 1, 2, 3])  # anchor -> 1, 2; 1 -> 3; 2 -> 4; 3 -> 5
    assert slot_counts([tree.levels([0, 2, 4])]) == [{"slot": 1, "reached": 1, "landed": 1},
                                                     {"slot": 2, "reached": 1, "landed": 1}]
    assert slot_counts([tree.levels([0, 1])]) == [{"slot": 1, "reached": 1, "landed": 1},
                                                  {"slot": 2, "reached": 1, "landed": 0}]


@pytest.fixture(scope="module")
def trio(tiny_dir):
    t = load_target(str(tiny_dir / "qwen3"))
    return t, load_dflash(str(tiny_dir / "dflash-qwen3"), t), load_dspark(str(tiny_dir / "dspark-qwen3"), t)


def auto_costs(k: int) -> Costs:
    """Costs under which auto drafts, and sometimes parks or branches, on the oracle's drafts."""
    return Costs(verify=[10.0 + 0.4 * i for i in range(k + 1)], draft=[0.0] + [0.5] * k, prior=[0.6] * k,
                 second=[0.3, 0.2, 0.1])


@pytest.mark.parametrize("cap, tree", [(3, 0), (5, 0), (5, 8), ("auto", None)])
def test_one_plus_landed_per_round_is_the_mean_accept_length(trio, cap, tree):
    t, dflash, dspark = trio
    prompt = [12, 40, 33, 81, 9, 100, 27]
    want = Engine(t).generate(prompt, 40).token_ids
    for head in (dflash, dspark):
        for seed in range(2):
            oracle = tiny.OracleHead(head, want, len(prompt), corrupt=0.3, seed=seed)
            costs = auto_costs(head.max_drafts) if cap == "auto" else None
            res = Engine(t, oracle, max_draft=cap, tree=tree, costs=costs).generate(prompt, 40)
            rows = res.positions
            assert 1 + sum(r["landed"] for r in rows) / res.rounds == pytest.approx(res.mean_accept)
            assert all(r["landed"] <= r["reached"] for r in rows)
            assert all(a["reached"] >= b["reached"] for a, b in zip(rows, rows[1:]))  # deeper slots: fewer rounds
            assert all(b["reached"] <= a["landed"] for a, b in zip(rows, rows[1:]))  # reached only after a landing
            drafting = sum(1 for d in res.drafted if d)
            assert (rows[0]["reached"] if rows else 0) == drafting


def test_the_race_meters_outcome_api_and_cli_show_the_same_counts(trio):
    from demo.api import lane_update, race_result
    from demo.view import View

    t, dflash, dspark = trio
    settings = RaceSettings(max_new_tokens=24, dspark_max_draft=4, dflash_max_draft=6)
    events = list(run_race(t, {"dspark": dspark, "dflash": dflash}, "hello there", settings))
    final = events[-1]
    positions = final.outcome.positions
    assert set(positions) == {"dspark", "dflash"}
    for head in positions:
        assert positions[head] == final.results[head].positions
        live = [e.meter for e in events if e.kind == "round" and e.engine == head][-1]
        assert live.slots.rows() == positions[head]
        early = [e.meter for e in events if e.kind == "round" and e.engine == head][0]
        assert sum(r["reached"] for r in early.slots.rows()) <= sum(r["reached"] for r in positions[head])
    assert final.outcome.record()["positions"] == positions
    assert race_result(events, {"target": "tiny"})["positions"] == positions
    view = View.for_replay(events)
    for ev in events:
        view.feed(ev)
    assert lane_update(view, "dspark")["positions"] == positions["dspark"]
    assert lane_update(view, "greedy")["positions"] is None
    table = slot_table(positions, {"dspark": "DSpark", "dflash": "DFlash"})
    lines = table.splitlines()
    assert lines[0].split()[0] == "slot" and [ln.split()[0] for ln in lines[1:]] == ["DSpark", "DFlash"]
    first = positions["dspark"][0]
    assert f"{first['landed']}/{first['reached']}" in lines[1]
