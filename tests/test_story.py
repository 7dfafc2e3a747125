"""Who wins where, in ten seconds (spec.story): one line per domain from a measured table, ties within the
noise called ties, the reason from the accept lengths; the shipped table is labelled with machine and date."""

import json

import pandas as pd

from demo.story_panel import story_html
from spec.race.story import SHIPPED, shipped_story, story_of


def table(rows):
    return pd.DataFrame([{"method": m, "domain": d, "accept": a, "speedup": x} for m, d, a, x in rows])


def test_each_domain_in_one_line_with_ties_within_the_noise():
    t = table([("greedy (ours)", "chat", 1.0, 1.0), ("DSpark auto", "chat", 1.2, 0.98),
               ("DFlash auto", "chat", 1.1, 1.01),
               ("DSpark auto", "code", 1.7, 1.21), ("DFlash auto", "code", 1.5, 1.18),
               ("DSpark auto", "math", 2.6, 1.47), ("DFlash auto", "math", 2.2, 1.24),
               ("DSpark auto", "prose", 1.5, 1.10), ("DFlash auto", "prose", 1.9, 1.40)])
    s = story_of(t, {"chat": 0.03, "code": 0.025, "math": 0.05, "prose": 0.02}, "measured somewhere")
    chat, code, math, prose = s.lines
    assert chat.startswith("chat: neither head beats greedy beyond the noise (DSpark ×0.98, DFlash ×1.01)")
    assert code.startswith("code: a tie between the heads") and "within the 5% noise" in code
    assert math == ("math: DSpark wins (DSpark ×1.47, DFlash ×1.24): DSpark lands more per round "
                    "(accept 2.60 vs 2.20).")
    assert prose.startswith("prose: DFlash wins") and "lands more per round (accept 1.90 vs 1.50)" in prose
    slow = story_of(table([("DSpark auto", "x", 1.1, 0.80), ("DFlash auto", "x", 1.0, 0.85)]), {"x": 0.02}, "")
    assert slow.lines[0].startswith("x: both heads are slower than greedy (DSpark ×0.80, DFlash ×0.85)")
    late = story_of(table([("DSpark auto", "x", 1.4, 1.50), ("DFlash auto", "x", 1.9, 1.20)]), {"x": 0.02}, "")
    assert "DSpark lands less per round (accept 1.40 vs 1.90) but its rounds cost less" in late.lines[0]
    assert s.rows[2] == {"domain": "math", "DSpark": "2.60 / ×1.47", "DFlash": "2.20 / ×1.24"}
    html = story_html(s)
    assert "Who wins where: measured somewhere" in html and html.count("<li>") == 4


def test_the_story_says_where_prompt_lookup_wins_and_where_a_head_beats_it():
    t = table([("DSpark auto", "code", 1.7, 1.21), ("DFlash auto", "code", 1.5, 1.18), ("lookup auto", "code", 3.1, 1.62),
               ("DSpark auto", "math", 2.6, 1.47), ("DFlash auto", "math", 2.2, 1.24), ("lookup auto", "math", 1.3, 1.05),
               ("DSpark", "chat", 1.1, 0.90), ("DFlash", "chat", 1.0, 0.92), ("lookup", "chat", 1.0, 0.95)])
    s = story_of(t, {"code": 0.025, "math": 0.05, "chat": 0.02}, "a sweep")
    code, math, chat = s.lines
    assert code == ("code: Prompt lookup wins (DSpark ×1.21, DFlash ×1.18, Prompt lookup ×1.62): Prompt lookup lands "
                    "more per round (accept 3.10 vs 1.70).")
    assert math.startswith("math: DSpark wins") and "accept 2.60 vs 2.20" in math  # against the runner-up
    assert chat.startswith("chat: every racer is slower than greedy")
    assert s.rows[0]["Prompt lookup"] == "3.10 / ×1.62"
    assert "Prompt lookup auto: accept / speedup" in story_html(s)


def test_a_bench_folder_tells_its_story_with_machine_and_date(tmp_path):
    t = table([("greedy (ours)", "math", 1.0, 1.0), ("DSpark auto", "math", 2.6, 1.47),
               ("DFlash auto", "math", 2.2, 1.2)])
    (tmp_path / "table.json").write_text(t.to_json(orient="records"))
    pd.DataFrame([{"domain": "math", "method": "DSpark auto", "spread": 0.04}]).to_csv(tmp_path / "runs.csv")
    (tmp_path / "table.md").write_text("# pocket: 3 prompts\nLinux x86_64, 2 cores (Xeon), mlx 0.32.4, load average "
                                       "1.02 at start; BLAS OpenBLAS; 2026-12-06\n")
    s = shipped_story(tmp_path)
    assert s.source.startswith("measured on Linux x86_64, 2 cores (Xeon), mlx 0.32.4, 2026-12-06 (pocket preset")
    assert s.lines[0].startswith("math: DSpark wins")
    assert shipped_story(tmp_path / "missing") is None
    shipped = shipped_story(SHIPPED)  # the README's table, shipped with the project
    assert shipped is not None and len(shipped.lines) == 4, SHIPPED  # chat, code, edit, math
    assert shipped.branched  # the heads as a race runs them by default: with the lookup branch
    assert json.loads((SHIPPED / "table.json").read_text())


def test_the_last_sweep_here_is_the_story_of_its_models(tmp_path, monkeypatch):
    from spec.race.story import remember_sweep, story_for, sweep_story

    monkeypatch.setenv("SPEC_ARENA_CACHE", str(tmp_path))
    models = {"target": "SmolLM2", "dspark": "ours", "dflash": "ours"}
    doc = {"table": json.loads(table([("greedy", "code", 1.0, 1.0), ("DSpark", "code", 1.8, 1.31),
                                      ("DFlash", "code", 1.5, 1.02)]).to_json(orient="records")),
           "prompts": [{"domain": "code", "prompt": "def f():"}] * 2, "models": models, "stopped": False,
           "settings": {"max_new_tokens": 64, "temperature": 0.0, "dspark_max_draft": "auto", "dflash_max_draft": 4},
           "timestamp": "2026-12-06T18:30:00+00:00"}
    assert sweep_story(models) is None and story_for(models) is not None  # none yet: the shipped table
    remember_sweep({**doc, "stopped": True})  # a stopped sweep is not a measurement of every domain asked
    assert sweep_story(models) is None
    remember_sweep(doc)
    s = story_for(models, mine=True)  # 2 prompts a domain: smaller than the shipped table, so its own session's
    assert s.source.startswith("your last domain sweep on this machine, 2026-12-06 18:30 UTC (2 prompts, 64 new")
    assert "draft lengths auto / 4; a small sample: 2 races per domain, shown to you only" in s.source
    assert s.label == "as raced"
    assert s.lines == ["code: DSpark wins (DSpark ×1.31, DFlash ×1.02): DSpark lands more per round "
                       "(accept 1.80 vs 1.50)."]
    assert "DSpark as raced: accept / speedup" in story_html(s)
    assert sweep_story({**models, "dflash": "another head"}) is None  # other models: their own story
    remember_sweep({**doc, "prompts": [{"domain": "code", "prompt": "def f():"}]})
    assert "draft lengths auto / 4; a small sample: one race per domain, shown to you only: other visitors and a " \
           "reload see the shipped table (3 prompts per domain)" in sweep_story(models).source


def test_a_sweep_smaller_than_the_shipped_table_does_not_replace_it_for_everyone(tmp_path, monkeypatch):
    """One race per domain once became every later visitor's "who wins where" in place of the shipped table of
    3 prompts per domain (2 trials each): now only the session that ran it sees it; as many prompts a domain
    as the shipped table replace it for everyone."""
    from spec.race.story import remember_sweep, story_for

    monkeypatch.setenv("SPEC_ARENA_CACHE", str(tmp_path))
    models = {"target": "SmolLM2", "dspark": "ours", "dflash": "ours"}
    shipped = shipped_story(SHIPPED)
    assert shipped.per_domain == 3
    rows = [(m, d, 1.5, 1.1) for d in ("chat", "code", "math") for m in ("greedy", "DSpark", "DFlash")]
    doc = {"table": json.loads(table(rows).to_json(orient="records")), "models": models, "stopped": False,
           "settings": {"max_new_tokens": 48, "temperature": 0.0, "dspark_max_draft": "auto", "dflash_max_draft": "auto"},
           "timestamp": "2026-12-07T01:00:00+00:00"}
    remember_sweep({**doc, "prompts": [{"domain": d, "prompt": "p"} for d in ("chat", "code", "math")]})
    assert story_for(models) == shipped  # a reload, another visitor
    mine = story_for(models, mine=True)  # the session that ran it, told why others see the table
    assert mine != shipped and "one race per domain, shown to you only" in mine.source
    remember_sweep({**doc, "prompts": [{"domain": d, "prompt": f"p{i}"} for d in ("chat", "code", "math")
                                       for i in range(3)]})
    big = story_for(models)
    assert big != shipped and big.per_domain == 3 and "small sample" not in big.source


def test_the_heads_rows_with_the_lookup_branch_tell_the_story_where_a_table_has_them():
    """A race runs the heads with the lookup branch by default: the story reads those rows, and says so."""
    t = table([("greedy (ours)", "edit", 1.0, 1.0), ("DSpark auto", "edit", 2.4, 1.41),
               ("DSpark auto + lookup", "edit", 4.2, 1.61), ("DFlash auto", "edit", 2.2, 1.29),
               ("DFlash auto + lookup", "edit", 4.0, 1.45), ("lookup auto", "edit", 2.5, 1.50)])
    s = story_of(t, {"edit": 0.017}, "measured")
    assert s.branched and s.rows[0]["DSpark"] == "4.20 / ×1.61" and s.rows[0]["Prompt lookup"] == "2.50 / ×1.50"
    assert s.lines[0].startswith("edit: DSpark wins")
    html = story_html(s)
    assert "DSpark auto + lookup branch: accept" in html and "Prompt lookup auto: accept" in html
    plain = story_of(table([("DSpark auto", "edit", 2.4, 1.41), ("DFlash auto", "edit", 2.2, 1.29)]), {}, "")
    assert not plain.branched and "+ lookup branch" not in story_html(plain)
