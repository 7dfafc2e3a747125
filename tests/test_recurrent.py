"""Hybrid (gated DeltaNet, short conv) and mixture-of-experts targets: rows taken back out of recurrent
layers leave them exactly as feeding the committed tokens one by one would, and both heads decode
losslessly on them. Targets are built with mlx-lm's own classes from published configs (tests/formats),
shrunk in width only, their layer patterns kept."""

import json
import random

import mlx.core as mx
import numpy as np
import pytest
import tiny
from mlx_lm.generate import generate_step
from scipy.stats import chisquare

from spec.errors import SpecError
from spec.heads.registry import load_dflash, load_dspark
from spec.loop.autodraft import Costs
from spec.loop.caches import RecurrentCache
from spec.loop.calibrate import costs_for
from spec.loop.engine import Engine
from spec.loop.verify import Sampling
from spec.target import load_target

# LFM2's short-convolution layers (no recurrence: a conv state only). No LFM2 hub config is quoted in what we
# read: these are mlx-lm's own ModelArgs fields for lfm2, with two attention layers among four.
LFM2 = {"model_type": "lfm2", "vocab_size": 272, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 512, "norm_eps": 1e-5, "conv_bias": False,
        "conv_L_cache": 3, "block_dim": 64, "block_multiple_of": 16, "block_ffn_dim_multiplier": 1.0,
        "block_auto_adjust_ff_dim": False, "block_ff_dim": 128, "full_attn_idxs": [1, 3], "eos_token_id": 2}

# name -> (published config folder in tests/formats, or a config; decoder layers kept: whole periods of its
# layer pattern)
TARGETS = {
    "qwen3_5": ("Qwen--Qwen3.5-27B", 8),  # 3 gated DeltaNet layers, then 1 full attention
    "qwen3_5_moe": ("Qwen--Qwen3.5-35B-A3B", 4),  # the same, with 256 experts (shrunk to 8, 2 per token)
    "qwen3_moe": ("Qwen--Qwen3-30B-A3B", 4),  # 128 experts, 8 per token (shrunk to 8 and 2)
    "gpt_oss": ("openai--gpt-oss-20b", 4),  # experts, attention sinks, sliding windows of 128 (shrunk to 8)
    "lfm2": (LFM2, 4),
}


@pytest.fixture(scope="module", params=sorted(TARGETS))
def pair(request, tmp_path_factory):
    name = request.param
    src, layers = TARGETS[name]
    root = tmp_path_factory.mktemp(name)
    cfg = tiny.small_config(tiny.published(src) if isinstance(src, str) else src, layers)
    tiny.make_from_config(root / "target", cfg)
    text = cfg.get("text_config") or cfg
    taps = (1, layers - 2)
    tiny.make_dflash_head(root / "dflash", text, taps=taps)
    tiny.make_dspark_head(root / "dspark", text, taps=taps)
    t = load_target(str(root / "target"))
    return t, load_dflash(str(root / "dflash"), t), load_dspark(str(root / "dspark"), t)


@pytest.mark.parametrize("k", [1, 4, 7, 15])
def test_rollback_equals_feeding_the_kept_tokens_one_by_one(pair, k):
    tiny.assert_rollback_exact(pair[0], k)


def test_a_second_take_back_of_the_same_rows_is_refused(pair):
    t, _, _ = pair
    if not t.recurrent:
        pytest.skip("no recurrent layers")
    cache = t.make_cache()
    t(mx.array([[5, 6, 7, 8]]), cache)
    t.trim(cache, 2)
    with pytest.raises(RuntimeError, match="latest forward"):
        t.trim(cache, 1)


def test_taps_are_each_decoder_layers_output_whatever_its_mixer(pair):
    t, _, _ = pair
    ids = mx.array([[5, 6, 7, 8, 9]])
    hidden = {}
    inner = t.inner
    h = inner.embed_tokens(ids)
    cache = t.make_cache()
    for i, (layer, c) in enumerate(zip(inner.layers, t.make_cache())):  # the model's own layers, fed by hand
        mask = None if isinstance(c, RecurrentCache) else "causal"
        h = layer(h, mask, c)
        hidden[i] = h
    logits, taps = t(ids, cache, taps=tuple(range(t.num_layers)))
    H = t.hidden_size
    for i in range(t.num_layers):
        assert mx.allclose(taps[..., i * H : (i + 1) * H], hidden[i], atol=1e-4), i
    assert mx.allclose(logits, t.model(ids), atol=1e-4)


def mlx_lm_greedy(t, prompt, n):
    """mlx-lm's own greedy decoding of the same model, cut where ours stops (eos)."""
    out = []
    for (tok, _), _ in zip(generate_step(mx.array(prompt), t.model, max_tokens=n,
                                         sampler=lambda x: mx.argmax(x, axis=-1)), range(n)):
        out.append(int(tok))
        if out[-1] in t.eos_ids:
            break
    return out


def paying_costs(k: int) -> Costs:
    """Costs under which drafting pays (a verify row costs 2% of a step): auto drafts whatever this
    machine's load, so the test sees its drafting rounds (measured costs may park a loaded machine)."""
    return Costs(verify=[10.0 + 0.2 * i for i in range(k + 1)], draft=[0.0] + [0.5] * k, prior=[0.7] * k,
                 second=[0.3, 0.2, 0.1])


@pytest.mark.parametrize("cap", [1, 3, 0, "auto"])
def test_partial_acceptance_is_lossless_for_both_heads(pair, cap):
    """Heads that guess right most of the time (tiny.OracleHead around each real head: its drafts are
    the target's greedy continuation with corruptions) land partly; the output stays the target's."""
    t, dflash, dspark = pair
    prompt = [12, 40, 33, 81, 9, 100, 27]
    want = Engine(t).generate(prompt, 48).token_ids
    assert want == mlx_lm_greedy(t, prompt, 48)
    for head in (dflash, dspark):
        rounds = []  # (landed, drafted) of every drafting round
        for seed in range(2):
            oracle = tiny.OracleHead(head, want, len(prompt), corrupt=0.25, seed=seed)
            eng = Engine(t, oracle, max_draft=cap, costs=paying_costs(oracle.max_drafts) if cap == "auto" else None)
            oracle.pos, oracle.rng = 0, random.Random(seed)
            res = eng.generate(prompt, 48)
            assert res.token_ids == want, (head.kind, cap, seed)
            rounds += [(a - 1, d) for a, d in zip(res.accept_lengths, res.drafted) if d]
        assert any(0 < a for a, _ in rounds), (head.kind, cap)  # drafts landed (auto: it chose to draft) ...
        if cap != "auto":  # ... and some were rejected: rows taken back (auto may draft too little for that)
            assert any(a < d for a, d in rounds), (head.kind, cap)
        if cap not in (1, "auto"):
            assert any(0 < a < d for a, d in rounds), (head.kind, cap)  # ... some landed partly


def test_real_heads_are_lossless_at_every_cap_and_auto(pair):
    t, dflash, dspark = pair
    for prompt in ([5, 6, 7, 8], [100, 120, 30, 40, 50, 60]):
        want = Engine(t).generate(prompt, 24).token_ids
        for head in (dflash, dspark):
            for cap in (1, 3, 0, "auto"):
                eng = Engine(t, head, max_draft=cap, costs=costs_for(t, head, cap))
                assert eng.generate(prompt, 24).token_ids == want, (head.kind, cap)


@pytest.mark.parametrize("row", range(6))
def test_a_tree_forward_through_recurrent_layers_is_each_path_fed_alone(pair, row):
    """Recurrent layers run a tree path by path (spec.branches), sliding windows see each row's own window:
    every row's logits are its path's, and keeping any path leaves the layers as feeding that path would
    (the next tokens agree). The prompt is longer than gpt-oss's shrunk window (8)."""
    t = pair[0]
    assert t.check_trees() == ""
    tiny.assert_tree_row_is_its_path(t, list(range(30, 50)), tiny.hand_tree(), row)


def test_trees_on_every_family_here_are_lossless(pair):
    """Every family here verifies trees: mixture-of-experts and windowed layers with a mask, recurrent
    layers path by path (spec.branches); lossless with guesses that leave through later siblings."""
    t, dflash, dspark = pair
    prompt = [12, 40, 33, 81, 9, 100, 27]
    want = Engine(t).generate(prompt, 32).token_ids
    assert t.check_trees() == ""
    for head in (dflash, dspark):
        eng = Engine(t, tiny.OracleHead(head, want, len(prompt), corrupt=0.25, seed=1), max_draft=5, tree=12)
        assert eng.tree == 12 and eng.tree_note == ""
        res = eng.generate(prompt, 32)
        assert res.token_ids == want, head.kind
        assert max(res.accept_lengths) > 1 and any(res.trees)


def test_a_shared_prefill_gives_each_engine_its_own_recurrent_state(pair):
    """A race prefills once and copies the cache to each engine: one engine's rounds must not move
    another's recurrent state (its slots live in a list)."""
    from spec.loop.prefill import Prefill

    t, dflash, dspark = pair
    prompt = [14, 15, 16, 17, 18]
    want = Engine(t).generate(prompt, 16).token_ids
    engines = [Engine(t, dflash, max_draft=3), Engine(t, dspark, max_draft=2), Engine(t)]
    taps = sorted({i for e in engines for i in e.taps})
    pre = Prefill(t, prompt, taps).run()
    gens = [e.start(prompt, 16) for e in engines]
    for g in gens:
        g.share(pre)
    while not all(g.done for g in gens):  # interleaved, one round each
        for g in gens:
            if not g.done:
                g.step()
                g.settle()
    assert [g.result.token_ids for g in gens] == [want] * 3


def vocab8_hybrid(tmp_path):
    cfg = tiny.small_config(tiny.published("Qwen--Qwen3.5-27B"), 4, vocab=8)
    folder = tiny.make_from_config(tmp_path / "t", cfg, seed=5, scale=1.0)
    tiny.make_dspark_head(tmp_path / "h", cfg["text_config"], taps=(0, 2), block_size=3, rank=4, seed=7)
    t = load_target(str(folder))
    t.eos_ids = set()
    return t, load_dspark(str(tmp_path / "h"), t)


def test_sampling_on_a_hybrid_target_is_an_exact_sample(tmp_path):
    """T = 1 through the whole engine (DSpark, cap 2: the second and third tokens are drafted and verified,
    rejected drafts rolled back out of the gated DeltaNet layers) against the target's own law."""
    from test_sampling import expected_counts, later_tokens_law

    t, head = vocab8_hybrid(tmp_path)
    prompt = [1, 4, 6]
    exp = later_tokens_law(t, prompt, Sampling(1.0, seed=0))
    n, counts, rolled = 1200, np.zeros((8, 8)), 0
    for seed in range(n):
        res = Engine(t, head, max_draft=2, sampling=Sampling(1.0, seed=seed)).generate(prompt, 3)
        counts[res.token_ids[1], res.token_ids[2]] += 1
        rolled += any(a - 1 < d for a, d in zip(res.accept_lengths, res.drafted) if d)
    assert rolled > n // 10  # rejections happened: the rollback was exercised
    assert chisquare(counts.ravel(), expected_counts(exp.ravel(), n)).pvalue > 1e-3


@pytest.mark.parametrize("edit, words", [
    (lambda c: c.update(model_type="falcon_h1"), "falcon_h1"),
])
def test_families_still_refused_say_why(edit, words, tmp_path):
    cfg = tiny.small_config(tiny.published("Qwen--Qwen3.5-27B"), 4)
    folder = tiny.make_from_config(tmp_path / "t", cfg)
    edit(cfg)
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(SpecError, match=words):
        load_target(str(folder))
