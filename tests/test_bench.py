"""The benches on a tiny random preset: they run in seconds, write every output, check losslessness; and
`python -m spec bench`'s sub-commands, old spellings and flags."""

import inspect
import json
import math
import subprocess
import sys

import pandas as pd
import pytest

from spec import report
from spec.bench import flags
from spec.bench import head_to_head as h2h
from spec.bench.curve import curve_configs, run_child
from spec.bench.main import main, parser


def test_head_to_head_smoke(tiny_dir, tmp_path):
    out = tmp_path / "bench"
    p = subprocess.run([sys.executable, "-m", "spec", "bench", "head-to-head", "--target", str(tiny_dir / "qwen3"),
                        "--dspark", str(tiny_dir / "dspark-qwen3"), "--dflash", str(tiny_dir / "dflash-qwen3"),
                        "--per-domain", "1", "--trials", "1", "--max-new-tokens", "8", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    table = pd.read_csv(out / "table.csv")
    assert set(table["domain"]) == {"chat", "code", "math", "edit"}
    methods = list(dict.fromkeys(table["method"]))
    assert methods == ["greedy (ours)", "greedy (mlx-lm)", "DSpark cap 2", "DSpark cap 4", "DSpark full (7)",
                       "DSpark tree (7)", "DSpark auto", "DSpark auto, chains", "DSpark auto + lookup", "DFlash cap 2",
                       "DFlash full (7)", "DFlash tree (7)", "DFlash auto", "DFlash auto, chains", "DFlash auto + lookup",
                       "lookup full (15)", "lookup auto"]
    md = (out / "table.md").read_text()
    assert "chosen draft lengths of the auto rows" in md
    assert "auto's cost model, lookup head" in md  # the head-free racer's costs too
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
    p = subprocess.run([sys.executable, "-m", "spec", "bench", "race-vs-solo", "--target", str(tiny_dir / "qwen3"),
                        "--dspark", str(tiny_dir / "dspark-qwen3"), "--dflash", str(tiny_dir / "dflash-qwen3"),
                        "--per-domain", "1", "--trials", "1", "--max-new-tokens", "8", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    runs = pd.read_csv(out / "race_vs_solo_runs.csv")
    assert set(runs["engine"]) == {"dspark", "dflash", "greedy"} and set(runs["domain"]) == {"chat", "code", "math", "edit"}
    assert (runs["solo tok/s"] > 0).all() and (runs["race tok/s"] > 0).all()
    assert "race / solo" in (out / "race_vs_solo.md").read_text()


def test_sweep_smoke_and_its_table_equals_the_races(tiny_dir, tmp_path, qwen3):
    """`bench sweep` and the app's tab share spec.sweep: each cell is the summary of the races it ran."""
    from spec.heads.registry import load_dflash, load_dspark
    from spec.race.run import run_race
    from spec.race.settings import RaceSettings
    from spec.race.sweep import grid, sweep

    out = tmp_path / "sweep"
    p = subprocess.run([sys.executable, "-m", "spec", "bench", "sweep", "--target", str(tiny_dir / "qwen3"),
                        "--dspark", str(tiny_dir / "dspark-qwen3"), "--dflash", str(tiny_dir / "dflash-qwen3"),
                        "--per-domain", "1", "--max-new-tokens", "8", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    table = pd.read_csv(out / "table.csv")
    assert set(table["domain"]) == {"chat", "code", "math", "edit"} and set(table["lossless"]) == {"baseline", "identical"}
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
    p = subprocess.run([sys.executable, "-m", "spec", "bench", "prefill", "--tokens", "200",
                        "--target", str(tiny_dir / "qwen3"),
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
    """`bench rollback` on a folder: one row per draft length, the rollback beside the verify it follows
    and beside the second forward it avoids; the recurrent layers counted from the published pattern."""
    import tiny

    folder = tiny.make_from_config(tmp_path / "hybrid", tiny.small_config(tiny.published("Qwen--Qwen3.5-27B"), 8))
    out = tmp_path / "rollback"
    p = subprocess.run([sys.executable, "-m", "spec", "bench", "rollback", "--target", str(folder), "--runs", "2",
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


# -- `python -m spec bench`: sub-commands, their flags, the old spellings ----------------------------------
def test_the_bench_lists_each_benchmark_in_one_line_and_each_has_its_own_help(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    listed = capsys.readouterr().out.splitlines()
    for name, (line, _) in flags.COMMANDS.items():
        assert any(row.split() == [name, *line.split()] for row in listed), name
        with pytest.raises(SystemExit) as done:
            main([name, "--help"])
        assert done.value.code == 0 and f"usage: python -m spec bench {name}" in capsys.readouterr().out


def test_each_benchmark_gets_its_flags_as_its_own_keywords_and_defaults():
    """main hands vars(args) over as keywords: every flag a keyword of the benchmark, with its default."""
    p, _ = parser()
    for name in flags.COMMANDS:
        args = p.parse_args([name, "runs.csv"] if name == "tree-estimate" else [name])
        given = {k: v for k, v in vars(args).items() if not k.startswith("_")}
        params = inspect.signature(args._run).parameters
        assert set(given) == set(params), name
        assert all(given[k] == v.default for k, v in params.items() if v.default is not v.empty), name


def called(monkeypatch) -> list:
    """Every benchmark replaced by one that records which ran, with what."""
    calls = []
    for run in ("run_head_to_head", "run_curve", "run_race_vs_solo", "run_prefill", "run_sweep", "run_rollback",
                "run_noise", "run_calibration", "run_tree_estimate"):
        monkeypatch.setattr(flags, run, lambda run=run, **kw: calls.append((run, kw)) or 0)
    return calls


@pytest.mark.parametrize("argv, run, expect, note", [
    ([], "run_head_to_head", {"trials": 3}, None),
    (["--per-domain", "1", "--methods", "auto, mlx-lm"], "run_head_to_head", {"per_domain": 1,
                                                                             "only": ["auto", "mlx-lm"]}, None),
    (["--curve", "--model", "m", "--runs", "2"], "run_curve", {"target": "m", "runs": 2},
     "curve --target m --runs 2"),
    (["--rollback", "--model=f"], "run_rollback", {"target": "f", "runs": 5}, "rollback --target=f"),
    (["--sweep", "--per-domain", "2"], "run_sweep", {"per_domain": 2}, "sweep --per-domain 2"),
    (["--calibration", "--out", "o"], "run_calibration", {"out": "o"}, "calibration --out o"),
    (["--noise", "--trials", "6"], "run_noise", {"trials": 6}, "noise --trials 6"),
    (["--tree-estimate", "r.csv", "--preset", "qwen3"], "run_tree_estimate", {"runs_csv": "r.csv", "preset": "qwen3"},
     "tree-estimate r.csv --preset qwen3"),
    (["--trials", "1", "--prefill", "200"], "run_prefill", {"tokens": 200, "trials": 1},
     "prefill --tokens 200 --trials 1"),
    (["--prefill", "0", "--trials", "1"], "run_head_to_head", {"trials": 1}, None),  # 0 was: no prefill bench
    (["--race-vs-solo", "--per-domain", "1"], "run_race_vs_solo", {"per_domain": 1}, "race-vs-solo --per-domain 1"),
])
def test_old_spellings_run_their_benchmark_and_name_the_new_form(monkeypatch, capsys, argv, run, expect, note):
    calls = called(monkeypatch)
    assert main(argv) == 0
    assert [c[0] for c in calls] == [run] and expect.items() <= calls[0][1].items()
    err = capsys.readouterr().err.splitlines()
    old = next((a.split("=")[0] for a in argv if a.split("=")[0] in flags.OLD), None)
    assert err == ([f"note: {old} is deprecated, use: python -m spec bench {note}"] if note else []), err


def test_model_is_an_old_name_of_target_said_once(monkeypatch, capsys):
    calls = called(monkeypatch)
    assert main(["curve", "--model", "folder"]) == 0 and calls[0][1]["target"] == "folder"
    assert capsys.readouterr().err.splitlines() == ["note: --model is deprecated, use --target"]
    with pytest.raises(SystemExit):
        main(["noise", "--model", "folder"])  # a bench of presets never had it


def test_tree_estimate_without_its_csv_says_what_to_pass(capsys):
    for argv in (["tree-estimate"], ["--tree-estimate"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 2
        assert "tree-estimate assets/bench/trees/runs.csv" in capsys.readouterr().err.splitlines()[-1]


def test_the_curve_child_runs_as_a_sub_command(tiny_dir):
    """The curve bench measures each BLAS in a child: `python -m spec bench curve --child ...`."""
    result = run_child(str(tiny_dir / "qwen3"), curve_configs()[0][1], runs=1, greedy_tokens=2, context=8)
    assert sorted(map(int, result["curve_ms"])) == [1, 2, 4, 8, 16] and len(result["greedy_tokens"]) == 2
