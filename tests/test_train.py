"""Training on a tiny random target: the loss falls, heads round-trip, resume continues."""

import json

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten

from spec.errors import SpecError
from spec.heads import init as head_init
from spec.heads.registry import load_dflash, load_dspark
from spec.heads.vocab import DraftVocab
from spec.loop.engine import Engine
from spec.prompts import build_sets, split_of
from spec.target import load_target
from spec.train import curve, distill, loss
from spec.train import trainer as train

PROMPTS = [{"prompt": f"question {i} about {w}", "domain": d}
           for i, (w, d) in enumerate([("cats", "chat"), ("loops", "code"), ("sums", "math")] * 4)]


@pytest.fixture(scope="module")
def setup(tiny_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    t = load_target(str(tiny_dir / "qwen3"))
    distill.build_data(t, root / "data", PROMPTS, [1, 3], max_new_tokens=24, batch=6, shard_size=6)
    return t, distill.load_data(root / "data"), root


def config(t, kind):
    return head_init.head_config(t, kind, layers=1, block_size=8 if kind == "dflash" else 5, taps=[1, 3],
                             mask_token_id=3, markov_rank=8)


def test_data_is_cached_and_complete(setup):
    t, data, root = setup
    assert len(data) == len(PROMPTS) and len(list((root / "data").glob("shard-*.safetensors"))) == 2
    seq = data[0]
    assert seq.taps.shape == (len(seq.ids), 2 * t.hidden_size) and seq.taps.dtype == np.float16
    assert list(seq.ids[: seq.prompt_len]) == t.encode_chat(PROMPTS[0]["prompt"])
    # taps equal a fresh forward of the same sequence, for every sequence of the left-padded batches
    for seq in data:
        _, fresh = t(mx.array([seq.ids.tolist()]), t.make_cache(), [1, 3])
        assert np.allclose(np.array(fresh[0].astype(mx.float16)), seq.taps, atol=1e-2)
    # and the answers are the target's own greedy answers, cut after an eos
    for p, seq in zip(PROMPTS, data):
        greedy = Engine(t).generate(p["prompt"], 24)
        assert seq.ids[seq.prompt_len :].tolist() == greedy.token_ids


def test_a_data_folder_made_for_other_prompts_is_refused(setup):
    t, _, root = setup
    before = sorted(p.stat().st_mtime_ns for p in (root / "data").glob("shard-*"))
    other = [dict(p, prompt=p["prompt"] + "?") for p in PROMPTS]  # same count, other prompts
    with pytest.raises(SpecError, match="other settings or prompts"):
        distill.build_data(t, root / "data", other, [1, 3], max_new_tokens=24, batch=6, shard_size=6)
    assert sorted(p.stat().st_mtime_ns for p in (root / "data").glob("shard-*")) == before  # nothing lost


@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_loss_falls_and_head_reloads_bit_identically(setup, kind, tmp_path):
    t, data, _ = setup
    s = train.TrainSettings(kind=kind, steps=40, lr=3e-3, anchors=8, ckpt_every=20)
    folder = train.fit(t, data, tmp_path / kind, s, config(t, kind))
    log = [e for e in json.loads((tmp_path / kind / "checkpoint" / "state.json").read_text())["log"] if "loss" in e]
    assert log[-1]["loss"] < log[0]["loss"] - 0.2
    loader = load_dflash if kind == "dflash" else load_dspark
    head = loader(str(folder), t)
    saved = mx.load(str(folder / "model.safetensors"))
    assert all(mx.array_equal(v, saved[k]).item() for k, v in tree_flatten(head.parameters()))
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["model_type"] == "qwen3" and cfg["num_target_layers"] == t.num_layers
    if kind == "dspark":  # frozen copies of the target's vocab matrices, as the format expects
        assert mx.array_equal(head.embed_tokens.weight, t.inner.embed_tokens.weight).item()
    # the answers' vocabulary travels with the head as its draft vocabulary
    answers = set(np.concatenate([s.ids[s.prompt_len:] for s in data]).tolist())
    assert head.draft_vocab is not None and set(np.array(head.draft_vocab.ids).tolist()) == answers
    shipped = train.export_head(head, cfg, tmp_path / "ship", ship=True)
    names = set(mx.load(str(shipped / "model.safetensors")))
    assert not names & set(train.VOCAB_TENSORS)
    assert json.loads((shipped / "draft_vocab.json").read_text())["token_ids"] == sorted(answers)


@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_a_new_head_starts_as_the_top_of_its_target(setup, kind):
    t, _, _ = setup
    head = head_init.new_head(t, head_init.head_config(t, kind, layers=2, taps=[1, 3], mask_token_id=3, markov_rank=8))
    copied = head_init.init_from_target(head, t)
    for mine, theirs in zip(head.layers, t.inner.layers[-2:]):  # draft layers 0, 1 = target layers L-2, L-1
        src = dict(tree_flatten(theirs.parameters()))
        assert all(mx.array_equal(v, src[k]).item() for k, v in tree_flatten(mine.parameters()))
    assert mx.array_equal(head.norm.weight, t.inner.norm.weight).item()
    H = t.hidden_size  # fc reads the deepest tap (identity), the others barely
    assert mx.array_equal(head.fc.weight[:, H:], mx.eye(H)).item() and mx.abs(head.fc.weight[:, :H]).max() < 0.1
    assert copied == 2 * len(tree_flatten(head.layers[0].parameters())) + 2


def test_a_bad_draft_vocabulary_file_is_one_clear_error(setup, tmp_path):
    t, _, _ = setup
    folder = train.export_head(head_init.new_head(t, config(t, "dflash")), config(t, "dflash"), tmp_path / "h")
    (folder / "draft_vocab.json").write_text('{"token_ids": [1, 2, 99999]}')
    with pytest.raises(SpecError, match="within 0"):
        load_dflash(str(folder), t)
    (folder / "draft_vocab.json").write_text("[1, 2]")
    with pytest.raises(SpecError, match="not a draft vocabulary"):
        load_dflash(str(folder), t)


def test_resume_continues_from_the_checkpoint(setup, tmp_path):
    t, data, _ = setup
    cfg = config(t, "dflash")
    full = train.fit(t, data, tmp_path / "full", train.TrainSettings(steps=30, lr=3e-3, anchors=8, ckpt_every=10), cfg)
    # the same run, interrupted after its step-20 checkpoint, then resumed
    part = tmp_path / "part"
    train.fit(t, data, part, train.TrainSettings(steps=30, lr=3e-3, anchors=8, ckpt_every=10), cfg, until=20)
    assert json.loads((part / "checkpoint" / "state.json").read_text())["step"] == 20
    resumed = train.fit(t, data, part, train.TrainSettings(steps=30, lr=3e-3, anchors=8, ckpt_every=10), cfg)
    a, b = mx.load(str(full / "model.safetensors")), mx.load(str(resumed / "model.safetensors"))
    assert all(mx.allclose(a[k], b[k], atol=1e-5).item() for k in a)


def test_accept_curve_reads_the_heldout_evaluations_of_runs(setup, tmp_path):
    t, data, _ = setup
    heldout = [{"prompt": "held out question", "domain": "chat"}, {"prompt": "held out sum", "domain": "math"}]
    s = train.TrainSettings(kind="dspark", steps=6, anchors=4, ckpt_every=3, eval_every=3, eval_tokens=8)
    train.fit(t, data, tmp_path / "run", s, config(t, "dspark"), heldout)
    table = curve.accept_curve([tmp_path / "run"])
    assert sorted(set(table["step"])) == [3, 6] and set(table["domain"]) == {"chat", "math"}
    assert set(table["kind"]) == {"dspark"} and table["accept"].between(1, 5).all()
    md, png = curve.write_curve(table, tmp_path / "out")
    assert "DSpark chat" in md.read_text() and png.stat().st_size > 0
    with pytest.raises(SpecError, match="no held-out evaluations"):
        train.fit(t, data, tmp_path / "quiet", train.TrainSettings(steps=2, anchors=4), config(t, "dflash"))
        curve.accept_curve([tmp_path / "quiet"])


def test_training_never_sees_heldout_prompts():
    sets = build_sets(60, seed=0)
    for domain, parts in sets.items():
        assert parts["train"] and all(split_of(p["prompt"]) == "train" for p in parts["train"])
        held = {p["prompt"] for p in parts["heldout"]}
        assert not held & {p["prompt"] for p in parts["train"]}


@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_answer_vocab_loss_equals_full_softmax_when_it_covers_everything(setup, kind):
    t, data, _ = setup
    head = head_init.new_head(t, config(t, kind))
    V = t.vocab_size
    everything = DraftVocab.of(head, range(V))
    seq = data[0]
    args = (mx.array(seq.ids), mx.array(seq.taps), mx.array(loss.sample_anchors(np.random.default_rng(0), seq, 6)))
    full, _ = loss.block_loss(head, *args, 4.0)
    sub, _ = loss.block_loss(head, *args, 4.0, everything)
    assert abs(full.item() - sub.item()) < 1e-4


def test_soft_labels_are_the_targets_top_k_on_answer_rows(setup, tmp_path):
    t, data, root = setup
    for seq in data[:3]:
        logits, _ = t(mx.array([seq.ids.tolist()]), t.make_cache())
        logp = np.array(logits[0] - mx.logsumexp(logits[0], axis=-1, keepdims=True))[seq.prompt_len - 1 :]
        ids, got = seq.soft_ids[seq.prompt_len - 1 :], seq.soft_logp[seq.prompt_len - 1 :].astype(np.float32)
        assert ids.shape == (len(seq.ids) - seq.prompt_len + 1, distill.SOFT_K)
        assert np.allclose(np.take_along_axis(logp, ids, -1), got, atol=2e-2)
        assert np.allclose(got.max(-1), logp.max(-1), atol=2e-2)  # the best is kept ...
        assert (got >= np.sort(logp, -1)[:, -distill.SOFT_K, None] - 2e-2).all()  # ... and only the top K
    # data made before soft labels: training with --soft says what to do
    old = tmp_path / "old"
    old.mkdir()
    for f in (root / "data").glob("shard-*"):
        tensors, meta = mx.load(str(f), return_metadata=True)
        mx.save_safetensors(str(old / f.name), {k: v for k, v in tensors.items() if not k.startswith("soft")}, meta)
    assert distill.load_data(old)[0].soft_ids is None
    with pytest.raises(SpecError, match="soft labels"):
        train.fit(t, distill.load_data(old), tmp_path / "r", train.TrainSettings(steps=1, soft=0.5), config(t, "dflash"))


@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_soft_loss_is_the_hard_loss_when_the_target_is_certain(setup, kind):
    t, data, _ = setup
    head = head_init.new_head(t, config(t, kind))
    seq = data[0]
    vocab = DraftVocab.of(head, loss.answer_vocab(data))
    args = (mx.array(seq.ids), mx.array(seq.taps), mx.array(loss.sample_anchors(np.random.default_rng(0), seq, 6)),
            4.0, vocab)
    # the next token with probability 1, runners-up at -inf (and one outside the draft vocabulary)
    nxt = np.concatenate([seq.ids[1:], seq.ids[-1:]])
    ids = np.stack([nxt] + [np.full_like(nxt, t.vocab_size - 1)] * 2, axis=1).astype(np.int32)
    logp = np.stack([np.zeros(len(nxt)), np.full(len(nxt), -np.inf), np.full(len(nxt), -np.inf)], 1)
    certain = (mx.array(ids), mx.array(logp.astype(np.float16)))
    hard, _ = loss.block_loss(head, *args)
    soft, _ = loss.block_loss(head, *args, certain, 1.0)
    assert abs(hard.item() - soft.item()) < 1e-4
    real, _ = loss.block_loss(head, *args, (mx.array(seq.soft_ids), mx.array(seq.soft_logp)), 1.0)
    assert abs(real.item() - hard.item()) > 1e-3  # the target's own distribution is not one-hot


def test_a_bad_soft_weight_is_one_clear_error_before_any_work(tmp_path):
    with pytest.raises(SpecError, match=r"weight in \[0, 1\]"):
        train.main(["--kind", "dflash", "--out", str(tmp_path / "run"), "--data", str(tmp_path / "data"),
                    "--soft", "2"])
    assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()


def test_accept_weighting_is_what_each_slot_adds_to_the_expected_accept_length():
    q = mx.array([[0.5, 0.5, 0.5], [0.9, 0.1, 0.9]])
    valid = mx.array([[True, True, True], [True, True, False]])
    w = loss.slot_weights("accept", 3.0, valid, -mx.log(q))
    # row 0: chains of 1, 2, 3 land with odds .5, .25, .125 -> slot k counts for the chains it is part of
    assert np.allclose(np.array(w), [[0.875, 0.375, 0.125], [0.99, 0.09, 0.0]], atol=1e-6)
    decay = loss.slot_weights("decay", 2.0, valid, -mx.log(q))
    assert np.allclose(np.array(decay)[0], np.exp(-np.arange(3) / 2.0)) and np.array(decay)[1, 2] == 0
    with pytest.raises(SpecError, match="weighting is one of"):
        train.TrainSettings(weighting="linear")


def test_prompt_slices_extend_the_same_train_stream_and_bad_ones_fail_before_any_work(tmp_path):
    sets = build_sets(12, seed=0)
    first = distill.train_prompts("12")
    assert first == [p for d in sorted(sets) for p in sets[d]["train"]]  # the shipped heads' data, as before
    more = distill.train_prompts("chat=12:20")
    assert {p["domain"] for p in more} == {"chat"} and len(more) == 8
    assert distill.train_prompts("chat=20") == [p for p in first if p["domain"] == "chat"] + more
    assert all(split_of(p["prompt"]) == "train" for p in more)
    for bad in ("chat=20:12", "poetry=5", "chat=a:b", "", "chat"):
        with pytest.raises(SpecError, match="--prompts-per-domain is N or domain="):
            train.main(["--kind", "dspark", "--out", str(tmp_path / "run"), "--data", str(tmp_path / "data"),
                        "--prompts-per-domain", bad])
    assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()


def test_more_data_is_read_only_when_it_is_finished_data_of_this_target_and_taps(setup, tmp_path):
    import shutil

    t, data, root = setup
    rows = distill.more_data(root / "data", t.name, [1, 3])
    assert len(rows) == len(data) and all((a.ids == b.ids).all() for a, b in zip(rows, data))
    with pytest.raises(SpecError, match="another target or taps"):
        distill.more_data(root / "data", t.name, [1, 2])
    with pytest.raises(SpecError, match="holds no distillation data"):
        distill.more_data(tmp_path, t.name, [1, 3])
    half = tmp_path / "half"
    shutil.copytree(root / "data", half)
    next(half.glob("shard-*.safetensors")).unlink()  # an interrupted build
    with pytest.raises(SpecError, match="unfinished"):
        distill.more_data(half, t.name, [1, 3])


def test_balanced_draws_see_each_domain_equally_however_many_answers_it_has():
    from spec.train.shards import Sequence_

    data = [Sequence_(np.array([i]), 0, d, np.zeros((1, 1))) for i, d in
            enumerate(["chat"] * 30 + ["code"] * 10 + ["math"] * 10)]
    seen = {True: {"chat": 0, "code": 0, "math": 0}, False: {"chat": 0, "code": 0, "math": 0}}
    for balance in (True, False):
        for step in range(3000):
            rng = np.random.default_rng([0, step])
            got = train.answers(rng, data, 2, balance)
            assert len(got) == 2 and got[0] is not got[1]  # two distinct answers a step
            for q in got:
                seen[balance][q.domain] += 1
    assert all(abs(n - 2000) < 150 for n in seen[True].values()), seen  # a third each (sd ~ 37)
    assert abs(seen[False]["chat"] - 3600) < 150, seen  # uniform over answers: chat's 60%
    rng, again = np.random.default_rng([0, 7]), np.random.default_rng([0, 7])
    assert [q.ids[0] for q in train.answers(rng, data, 2)] == list(again.choice(len(data), size=2, replace=False))
