"""The head-to-head bench on a tiny random preset: runs in seconds, writes every output, checks losslessness."""

import json
import math
import subprocess
import sys

import pandas as pd
import pytest

from spec import report
from spec.bench import head_to_head as h2h


def test_head_to_head_smoke(tiny_dir, tmp_path):
    out = tmp_path / "bench"
    p = subprocess.run([sys.executable, "-m", "spec", "bench", "--target", str(tiny_dir / "qwen3"),
                        "--dspark", str(tiny_dir / "dspark-qwen3"), "--dflash", str(tiny_dir / "dflash-qwen3"),
                        "--per-domain", "1", "--trials", "1", "--max-new-tokens", "8", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    table = pd.read_csv(out / "table.csv")
    assert set(table["domain"]) == {"chat", "code", "math"}
    methods = list(dict.fromkeys(table["method"]))
    assert methods == ["greedy (ours)", "greedy (mlx-lm)", "DSpark cap 2", "DSpark cap 4", "DSpark full (7)",
                       "DSpark tree (7)", "DSpark auto", "DSpark auto, chains", "DFlash cap 2", "DFlash full (7)",
                       "DFlash tree (7)", "DFlash auto", "DFlash auto, chains"]
    md = (out / "table.md").read_text()
    assert "chosen draft lengths of the auto rows" in md
    assert "auto's cost model, dspark head" in md and "verify (k+1 rows) ms" in md  # what auto weighed, per row count
    assert (table[table["method"] == "greedy (ours)"]["speedup"] == 1.0).all()
    assert (out / "speedup.png").stat().st_size > 1000 and json.loads((out / "table.json").read_text())
    assert "accept / tok/s / speedup" in (out / "table.md").read_text()


def test_the_bench_reports_how_far_trials_stray(tmp_path):
    assert report.spread([10.0, 11.0, 9.0, 10.0]) == pytest.approx(0.05)  # deviations 0, 1, 1, 0: median 0.5
    assert math.isnan(report.spread([10.0]))  # one trial says nothing about the noise
    methods, domains = ["greedy (ours)", "DSpark auto", "greedy (ours)"], ["chat", "chat", "code"]
    runs = pd.DataFrame({"domain": domains, "method": methods, "spread": [0.02, 0.04, 0.05]})
    table = pd.DataFrame({"method": methods, "domain": domains, "accept": [1.0, 1.5, 1.0], "tok/s": [10.0, 12.0, 9.0],
                          "speedup": [1.0, 1.2, 1.0], "draft % of verify": [0.0, 10.0, 0.0]})
    md = report.write_outputs(runs, table, tmp_path, "# synthetic")[0].read_text()
    assert "median over the runs): chat 3.0%, code 5.0%" in md


def test_a_lossy_method_fails_the_run(qwen3, tiny_dir, monkeypatch):
    from spec.heads.registry import load_dflash

    heads = {"dflash": load_dflash(str(tiny_dir / "dflash-qwen3"), qwen3)}
    real = h2h.run_method

    def lossy(target, heads_, m, ids, n, sampling, profile=False):
        r = real(target, heads_, m, ids, n, sampling, profile)
        if m.kind == "dflash":
            r["ids"] = r["ids"][:-1] + [r["ids"][-1] + 1]
        return r

    monkeypatch.setattr(h2h, "run_method", lossy)
    with pytest.raises(Exception, match="differs from greedy"):
        h2h.head_to_head(qwen3, heads, [{"domain": "code", "prompt": "hi"}], trials=1, max_new_tokens=6,
                         progress=False)


def test_vocab_ablation_adds_whole_vocabulary_rows(qwen3, tiny_dir):
    from spec.heads.registry import load_dspark

    head = load_dspark(str(tiny_dir / "dspark-qwen3"), qwen3)
    head.use_draft_vocab(range(4, qwen3.vocab_size, 2))
    runs = h2h.head_to_head(qwen3, {"dspark": head}, [{"domain": "code", "prompt": "hi"}], trials=1,
                            max_new_tokens=6, progress=False, vocab_ablation=True)
    rows = list(dict.fromkeys(runs["method"]))
    assert rows[-5:-2] == ["DSpark full (7)", "DSpark full, whole vocab", "DSpark tree (7)"]
    assert head.draft_vocab is not None  # the ablation row put the head back as it was


def test_adapting_adds_the_chooser_before_issue_39_beside_todays(qwen3, tiny_dir):
    from spec.heads.registry import load_dflash

    heads = {"dflash": load_dflash(str(tiny_dir / "dflash-qwen3"), qwen3)}
    assert not any(m.adapt for m in h2h.methods(heads))  # only on request
    runs = h2h.head_to_head(qwen3, heads, [{"domain": "code", "prompt": "hi"}], trials=2, max_new_tokens=12,
                            progress=False, only=["auto"], adapting=True)
    assert list(dict.fromkeys(runs["method"])) == ["greedy (ours)", "DFlash auto", "DFlash auto, chains",
                                                   "DFlash auto, adapting"]
    assert runs[runs["method"] == "DFlash auto"]["same_rounds"].all()  # both trials: the same rounds
    assert list(h2h.summarise(runs)["same rounds"])[:3] == ["1/1"] * 3


def test_race_vs_solo_smoke(tiny_dir, tmp_path):
    out = tmp_path / "race"
    p = subprocess.run([sys.executable, "-m", "spec", "bench", "--race-vs-solo", "--target", str(tiny_dir / "qwen3"),
                        "--dspark", str(tiny_dir / "dspark-qwen3"), "--dflash", str(tiny_dir / "dflash-qwen3"),
                        "--per-domain", "1", "--trials", "1", "--max-new-tokens", "8", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    runs = pd.read_csv(out / "race_vs_solo_runs.csv")
    assert set(runs["engine"]) == {"dspark", "dflash", "greedy"} and set(runs["domain"]) == {"chat", "code", "math"}
    assert (runs["solo tok/s"] > 0).all() and (runs["race tok/s"] > 0).all()
    assert "race / solo" in (out / "race_vs_solo.md").read_text()


def test_sweep_smoke_and_its_table_equals_the_races(tiny_dir, tmp_path, qwen3):
    """`bench --sweep` and the app's tab share spec.sweep: each cell is the summary of the races it ran."""
    from spec.heads.registry import load_dflash, load_dspark
    from spec.race.run import RaceSettings, run_race
    from spec.race.sweep import grid, sweep

    out = tmp_path / "sweep"
    p = subprocess.run([sys.executable, "-m", "spec", "bench", "--sweep", "--target", str(tiny_dir / "qwen3"),
                        "--dspark", str(tiny_dir / "dspark-qwen3"), "--dflash", str(tiny_dir / "dflash-qwen3"),
                        "--per-domain", "1", "--max-new-tokens", "8", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    table = pd.read_csv(out / "table.csv")
    assert set(table["domain"]) == {"chat", "code", "math"} and set(table["lossless"]) == {"baseline", "identical"}
    heads = {"dspark": load_dspark(str(tiny_dir / "dspark-qwen3"), qwen3),
             "dflash": load_dflash(str(tiny_dir / "dflash-qwen3"), qwen3)}
    prompts = [{"domain": "code", "prompt": "Sort a list."}, {"domain": "code", "prompt": "Reverse a string."}]
    updates = list(sweep(lambda text, s: run_race(qwen3, heads, text, s), prompts, RaceSettings(max_new_tokens=6)))
    assert [u.done for u in updates] == [1, 2]
    last = updates[-1]
    dspark = last.rows[last.rows["method"] == "DSpark"]
    cell = last.table[last.table["method"] == "DSpark"].iloc[0]
    assert cell["accept"] == pytest.approx(dspark["committed"].sum() / dspark["rounds"].sum())
    assert cell["tok/s"] == pytest.approx(dspark["tok_s"].median())
    assert grid(last.table).columns.tolist() == ["method", "code"]
    assert grid(last.table).iloc[0]["code"].endswith("x ✓")


def test_prefill_work_counts_one_pass_shared_and_one_per_engine_before(tiny_dir, tmp_path):
    out = tmp_path / "prefill"
    p = subprocess.run([sys.executable, "-m", "spec", "bench", "--prefill", "200", "--target", str(tiny_dir / "qwen3"),
                        "--dspark", str(tiny_dir / "dspark-qwen3"), "--dflash", str(tiny_dir / "dflash-qwen3"),
                        "--per-domain", "1", "--trials", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    runs = pd.read_csv(out / "prefill_runs.csv").set_index("prefill")
    n = runs["prompt tokens"].iloc[0]
    assert n >= 200 and (runs["lanes"] == 3).all()
    assert runs.loc["shared (one pass)", "prompt rows through the target"] == n
    assert runs.loc["per engine (before)", "prompt rows through the target"] == 3 * n
    assert "shared (one pass)" in (out / "prefill.md").read_text()


def test_rollback_bench_on_a_tiny_hybrid_and_its_table(tmp_path):
    """`bench --rollback` on a folder: one row per draft length, the rollback beside the verify it follows
    and beside the second forward it avoids; the recurrent layers counted from the published pattern."""
    import tiny

    folder = tiny.make_from_config(tmp_path / "hybrid", tiny.small_config(tiny.published("Qwen--Qwen3.5-27B"), 8))
    out = tmp_path / "rollback"
    p = subprocess.run([sys.executable, "-m", "spec", "bench", "--rollback", "--model", str(folder), "--runs", "2",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    table = pd.read_csv(out / "rollback.csv")
    assert list(table["k"]) == [1, 4, 8, 15] and list(table["kept"]) == [1, 3, 5, 8]
    assert (table["recurrent layers"] == "6 / 8").all() and (table["family"] == "qwen3_5").all()
    assert (table["verify_ms"] > 0).all() and (table["rollback_ms"] > 0).all() and (table["share_spread"] >= 0).all()
    assert table["rollback_share"].to_numpy() == pytest.approx((table["rollback_ms"] / table["verify_ms"]).to_numpy(),
                                                               rel=0.05)
    md = (out / "rollback.md").read_text()
    assert "| rollback share | spread |" in md and "second forward" in md


def test_the_rollback_bench_targets_keep_the_published_layer_patterns():
    """assets/bench/rollback/targets.json: every target builds, its recurrent layers where its family puts them."""
    from spec.bench.rollback import TARGETS, random_target

    targets = json.loads(TARGETS.read_text())["targets"]
    expect = {"dense (Qwen3-8B)": 0, "hybrid (Qwen3.5-4B)": 24, "hybrid MoE (Qwen3.5-35B-A3B)": 30}
    for name, want in expect.items():
        assert len(random_target(targets[name]["config"]).recurrent) == want, name


def test_methods_filter_keeps_the_reference(qwen3, tiny_dir):
    from spec.heads.registry import load_dspark

    head = load_dspark(str(tiny_dir / "dspark-qwen3"), qwen3)
    runs = h2h.head_to_head(qwen3, {"dspark": head}, [{"domain": "code", "prompt": "hi"}], trials=1,
                            max_new_tokens=4, progress=False, only=["auto", "mlx-lm"])
    rows = list(dict.fromkeys(runs["method"]))
    assert rows == ["greedy (ours)", "greedy (mlx-lm)", "DSpark auto", "DSpark auto, chains"]
