"""Training data at prefill speed: windows of text the target reads hold what its own answers hold, the
held-out split stays clean, the loss follows the target's greedy path, and runs mix, warm-start and resume."""

import importlib
import inspect
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten

from spec.errors import SpecError
from spec.heads import init as head_init
from spec.prompts import build_sets
from spec.prompts.stdlib import entries
from spec.target import load_target
from spec.train import corpus, distill, loss
from spec.train import trainer as train
from spec.train.shards import Sequence_, load_data

PROMPTS = [{"prompt": f"question {i} about {w}", "domain": d}
           for i, (w, d) in enumerate([("cats", "chat"), ("loops", "code"), ("sums", "math")] * 2)]
TAPS = [1, 3]


@pytest.fixture(scope="module")
def target(tiny_dir):
    return load_target(str(tiny_dir / "qwen3"))


@pytest.fixture(scope="module")
def answers(target, tmp_path_factory):
    root = tmp_path_factory.mktemp("answers")
    distill.build_data(target, root, PROMPTS, TAPS, max_new_tokens=20, batch=3, shard_size=3)
    return load_data(root)


def config(t, kind):
    return head_init.head_config(t, kind, layers=1, block_size=8 if kind == "dflash" else 5, taps=TAPS,
                                 mask_token_id=3, markov_rank=8)


def test_a_read_window_holds_what_the_generation_path_stores_for_the_same_text(target, answers):
    for seq in answers:
        row = corpus.read(target, [seq.ids.tolist()], TAPS)[0]
        assert np.allclose(row["taps"].astype(np.float32), seq.taps.astype(np.float32), atol=1e-2)
        first = seq.prompt_len - 1  # the answer path keeps top-K from the prompt's last row on
        got_ids, got_lp = row["soft_ids"][first:], row["soft_logp"][first:].astype(np.float32)
        ref_ids, ref_lp = seq.soft_ids[first:], seq.soft_logp[first:].astype(np.float32)
        # the same top-1 everywhere, the same log-probs, the same top-K set where the K-th is not a near tie
        assert (np.take_along_axis(got_ids, got_lp.argmax(-1)[:, None], -1)
                == np.take_along_axis(ref_ids, ref_lp.argmax(-1)[:, None], -1)).all()
        assert np.allclose(np.sort(got_lp, -1), np.sort(ref_lp, -1), atol=2e-2)
        for a, b in zip(got_ids, ref_ids):  # at most a near tie at the K-th place swapped
            assert len(set(a.tolist()) ^ set(b.tolist())) <= 2
        # and the greedy path read off the window is the target's answer, but where the best two tie in f16
        text = Sequence_(seq.ids, 0, "code", row["taps"], row["soft_ids"], row["soft_logp"], text=True)
        best2 = np.sort(row["soft_logp"].astype(np.float32), -1)[:, -2:]
        tie = np.concatenate([[False], (best2[:, 1] - best2[:, 0] < 1e-2)[:-1]])  # row p - 1 predicts p
        differ = text.greedy() != seq.ids
        assert not (differ & ~tie)[seq.prompt_len :].any()


def test_the_corpus_is_built_in_shards_resumes_and_refuses_other_settings(target, tmp_path):
    out = tmp_path / "corpus"
    corpus.build_corpus(target, out, TAPS, tokens={"math": 200}, window=32, batch=2, shard_size=3)
    seqs = load_data(out)
    assert len(seqs) == 7 and all(s.text and s.prompt_len == 0 and len(s.ids) == 32 for s in seqs)
    assert {s.domain for s in seqs} == {"math"} and seqs[0].taps.shape == (32, 2 * target.hidden_size)
    stamps = sorted(p.stat().st_mtime_ns for p in out.glob("shard-*"))
    (out / "shard-00002.safetensors").unlink()  # an interrupted build: the missing shard alone is read again
    corpus.build_corpus(target, out, TAPS, tokens={"math": 200}, window=32, batch=2, shard_size=3)
    assert sorted(p.stat().st_mtime_ns for p in out.glob("shard-*"))[:2] == stamps[:2]
    assert [s.ids.tolist() for s in load_data(out)] == [s.ids.tolist() for s in seqs]
    with pytest.raises(SpecError, match="other settings"):
        corpus.build_corpus(target, out, TAPS, tokens={"math": 200}, window=16)
    with pytest.raises(SpecError, match="unknown corpus source"):
        corpus.build_corpus(target, tmp_path / "x", TAPS, tokens={"poetry": 10})


def test_no_heldout_prompts_text_or_object_enters_the_corpus(monkeypatch, target):
    held = [e for e in entries() if e.is_python and e.ref.count(".") == 1 and corpus.held_out(e.ref)]
    kept = [e for e in entries() if e.is_python and e.ref.count(".") == 1 and not corpus.held_out(e.ref)
            and not corpus.held_out(e.ref.split(".")[0])]
    assert held and kept
    for e in held[:5] + kept[:5]:
        mod, name = e.ref.split(".")
        module = importlib.import_module(mod)
        try:
            source = inspect.getsource(getattr(module, name))
        except (OSError, TypeError):
            continue
        chunks = list(corpus.module_chunks(Path(module.__file__), mod))
        assert any(source in c for c in chunks) == (e in kept), e.ref
    # a document holding a held-out prompt's text is skipped
    prompt = build_sets(0, n_heldout=1)["chat"]["heldout"][0]["prompt"]
    monkeypatch.setitem(corpus.DOCUMENTS, "prose", lambda: [f"before. {prompt} after." * 20, "clean text. " * 400])
    got = target.tokenizer.decode(sum(corpus.windows(target, "prose", 10_000, window=16), []))
    assert "clean text" in got and prompt not in got and "before." not in got


def test_a_text_label_counts_only_while_the_text_follows_the_targets_greedy_path(target):
    head = head_init.new_head(target, config(target, "dflash"))
    T, p = 40, 20
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 200, T)
    greedy = ids.copy()
    greedy[p] = ids[p] + 1  # the text leaves the target's path at position p
    taps = mx.array(rng.standard_normal((T, 2 * target.hidden_size)).astype(np.float16))
    anchors = mx.array([p - 3, p - 2, p - 1])

    def at(g):
        return loss.block_loss(head, mx.array(ids), taps, anchors, 1e9, greedy=mx.array(g))[0].item()

    base = at(greedy)
    later = greedy.copy()
    later[p + 1 :] += 7  # labels after the parting: never counted for these anchors
    assert at(later) == pytest.approx(base, abs=1e-6)
    at_p = greedy.copy()
    at_p[p] += 5  # the label at the parting itself still counts
    assert abs(at(at_p) - base) > 1e-4
    # an answer is its own greedy path: passing it changes nothing
    same = loss.block_loss(head, mx.array(ids), taps, anchors, 3.0)[0].item()
    assert loss.block_loss(head, mx.array(ids), taps, anchors, 3.0, greedy=mx.array(ids))[0].item() == same


def test_steps_draw_answers_alone_unless_the_corpus_is_asked_for(answers):
    text = [Sequence_(s.ids, 0, "code", s.taps, s.soft_ids, s.soft_logp, text=True) for s in answers]
    plain = train.TrainSettings(seqs_per_step=2)
    old = [answers[int(i)] for i in np.random.default_rng([0, 5]).choice(len(answers), size=2, replace=False)]
    assert train.draw(np.random.default_rng([0, 5]), answers, text, plain, 5) == old  # the batches of before
    pre = train.TrainSettings(seqs_per_step=2, corpus_steps=3, corpus_share=0.5)
    assert all(s.text for step in range(3) for s in train.draw(np.random.default_rng(step), answers, text, pre, step))
    mixed = [s.text for step in range(3, 60) for s in train.draw(np.random.default_rng(step), answers, text, pre, step)]
    assert 0.3 < np.mean(mixed) < 0.7
    with pytest.raises(SpecError, match="share in"):
        train.TrainSettings(corpus_share=1.5)


def test_a_run_mixes_the_corpus_and_warm_starts_from_a_trained_head(target, answers, tmp_path):
    text = corpus.read(target, [list(range(10, 74))] * 2, TAPS)
    windows = [Sequence_(np.array(r["ids"]), 0, "code", r["taps"], r["soft_ids"], r["soft_logp"], text=True)
               for r in text]
    cfg = config(target, "dflash")
    first = train.fit(target, answers, tmp_path / "a", train.TrainSettings(steps=6, anchors=4, ckpt_every=3,
                                                                        corpus_share=0.5), cfg, corpus=windows)
    with pytest.raises(SpecError, match="need the corpus"):
        train.fit(target, answers, tmp_path / "b", train.TrainSettings(steps=2, corpus_steps=1), cfg)
    warm = train.start_head(target, cfg, train.TrainSettings(init=str(first)))
    saved = mx.load(str(first / "model.safetensors"))
    assert all(mx.array_equal(v, saved[k]).item() for k, v in tree_flatten(warm.trainable_parameters()))
    other = head_init.head_config(target, "dflash", layers=2, block_size=8, taps=TAPS, mask_token_id=3)
    with pytest.raises(SpecError, match="trained with other num_hidden_layers"):
        train.start_head(target, other, train.TrainSettings(init=str(first)))
    (first / "config.json").unlink()  # no config to compare: the weights' shapes still say it
    with pytest.raises(SpecError, match="not a dflash head of this shape"):
        train.start_head(target, other, train.TrainSettings(init=str(first)))
    with pytest.raises(SpecError, match="--init is one of"):
        train.TrainSettings(init="nowhere")


def test_compare_prints_the_heldout_accept_of_heads_side_by_side(tiny_dir, capsys):
    rc = train.main(["--compare", str(tiny_dir / "dflash-qwen3"), str(tiny_dir / "dflash-qwen3"), "--kind", "dflash",
                     "--target", str(tiny_dir / "qwen3"), "--eval-prompts", "1", "--eval-tokens", "6"])
    out = capsys.readouterr().out
    assert rc == 0 and out.count("dflash-qwen3") == 2 and all(d in out for d in ("chat", "code", "math", "mean"))
    rows = [line for line in out.splitlines() if "dflash-qwen3" in line]
    assert rows[0] == rows[1]  # the same head twice: the same numbers (T = 0)
