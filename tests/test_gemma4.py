"""Gemma-4: the target walk and its trimmable sliding-window caches, both drafters lossless on it,
the Gemma DSpark head format, and heads of the other family refused."""

import json
import random
import shutil

import mlx.core as mx
import pytest
import tiny
from hypothesis import example, given, settings
from hypothesis import strategies as st

from spec.errors import SpecError
from spec.heads.backbone import block_embed_ids, training_mask
from spec.heads.registry import load_dflash, load_dspark
from spec.loop.engine import Engine
from spec.presets import get_preset
from spec.target import WindowKVCache, load_target

WINDOW = 8  # the tiny target's sliding window: most prompts below cross it


@pytest.fixture(scope="module", autouse=True)
def small_cache_steps():
    """Grow the window caches 16 rows at a time, so short tests also exercise their compaction."""
    step, WindowKVCache.step = WindowKVCache.step, 16
    yield
    WindowKVCache.step = step


@pytest.fixture(scope="module")
def gemma_dir(tiny_dir):
    """An 8-bit hub-layout Gemma-4 target (as mlx-community ships it), a text-only one with per-layer
    inputs and shared KV (E2B-like), a Gemma4DSparkModel head and a DFlash head with sliding layers."""
    root = tiny_dir / "gemma4-family"
    if not root.exists():
        tiny.make_gemma4_target(root / "target", layout="gemma4", bits=8, window=WINDOW)
        tiny.make_gemma4_target(root / "text", layout="gemma4_text", window=WINDOW, hidden_size_per_layer_input=16,
                                num_kv_shared_layers=4, use_double_wide_mlp=True, attention_k_eq_v=False)
        cfg = json.loads((root / "target" / "config.json").read_text())
        tiny.make_gemma4_dspark_head(root / "dspark", cfg)
        tiny.make_gemma4_dflash_head(root / "dflash", cfg)
    return root


@pytest.fixture(scope="module")
def gemma(gemma_dir):
    t = load_target(str(gemma_dir / "target"))
    return t, load_dflash(str(gemma_dir / "dflash"), t), load_dspark(str(gemma_dir / "dspark"), t)


def test_target_walk_is_the_models_own(gemma_dir):
    ids = mx.array([list(range(10, 10 + 3 * WINDOW))])
    for name in ("target", "text"):
        t = load_target(str(gemma_dir / name))
        logits, hidden = t(ids, t.make_cache(), taps=(-1, 1, 7))
        assert mx.allclose(logits, t.model(ids), atol=1e-4), name  # scale, masks, softcap, per-layer inputs
        assert hidden.shape == (1, ids.shape[1], 3 * t.hidden_size)
        raw = t.inner.embed_tokens(ids)
        assert mx.allclose(hidden[..., : t.hidden_size], raw * t.hidden_size**0.5, atol=1e-3)
        assert mx.allclose(t.embed(ids), raw * t.hidden_size**0.5, atol=1e-3)
        assert float(mx.abs(logits).max()) < 30.0  # final_logit_softcapping
    assert len(t.make_cache()) == t.num_layers - 4  # shared-KV layers own no cache


def test_window_caches_trim_like_a_fresh_forward(gemma):
    """Verify chunks with rejected rows, trimmed away, across many windows and cache compactions."""
    t = gemma[0]
    rng = random.Random(0)
    seq = [rng.randrange(4, 260) for _ in range(160)]
    ref = t(mx.array([seq]), t.make_cache())[0][0]
    cache, pos, worst = t.make_cache(), 3, 0.0
    t(mx.array([seq[:pos]]), cache)
    while pos < 150:
        keep, junk = rng.randrange(1, 9), rng.randrange(0, 8)
        rows = seq[pos : pos + keep] + [rng.randrange(4, 260) for _ in range(junk)]
        logits = t(mx.array([rows]), cache)[0][0]
        worst = max(worst, float(mx.abs(logits[:keep] - ref[pos : pos + keep]).max()))
        t.trim(cache, junk)
        pos += keep
    assert worst < 1e-3
    window = [c for c in cache if isinstance(c, WindowKVCache)][0]
    assert window.start > 0 and window.keys.shape[2] < 64  # old rows were dropped: memory stays bounded


prompts = st.lists(st.integers(min_value=4, max_value=259), min_size=1, max_size=4 * WINDOW)


@settings(max_examples=10, deadline=None)
@given(prompt=prompts, cap=st.integers(1, 7), n=st.integers(1, 24))
@example(prompt=list(range(40, 40 + 5 * WINDOW)), cap=7, n=24)  # always one prompt well past the window
@example(prompt=[9], cap=1, n=3 * WINDOW)  # and a generation that crosses it
def test_random_heads_are_lossless(gemma, prompt, cap, n):
    t, dflash, dspark = gemma
    want = Engine(t).generate(prompt, n).token_ids
    for drafter, threshold in ((dflash, 0.0), (dspark, 0.0), (dspark, 0.6)):
        res = Engine(t, drafter, max_draft=min(cap, drafter.max_drafts), confidence_threshold=threshold).generate(prompt, n)
        assert res.token_ids == want, (drafter.kind, cap)
        assert all(1 <= a <= d + 1 for a, d in zip(res.accept_lengths, res.drafted))


class Oracle:
    """The true greedy continuation with random corruptions, through a real head's cache: many
    accept lengths occur, so many trim depths are exercised."""

    def __init__(self, head, truth, prompt_len, seed, corrupt=0.3):
        self.head, self.truth, self.corrupt, self.rng = head, truth, corrupt, random.Random(seed)
        self.kind, self.config, self.max_drafts = head.kind, head.config, head.max_drafts
        self.context = -prompt_len  # committed tokens the drafter has seen, less the prompt

    def make_cache(self):
        return self.head.make_cache()

    def see(self, cache, tokens):
        self.head.see(cache, tokens)

    def propose(self, cache, new_taps, anchor, k, sampling, key, threshold=0.0):
        self.head.propose(cache, new_taps, anchor, k, sampling, key)
        self.context += 0 if new_taps is None else new_taps.shape[1]
        nxt = self.truth[self.context + 1 : self.context + 1 + k]  # the anchor is truth[context]
        nxt += [5] * (k - len(nxt))
        out = [x if self.rng.random() > self.corrupt else (x + 1) % 250 + 4 for x in nxt]
        return mx.array(out, dtype=mx.uint32), None


def test_partial_acceptance_is_lossless(gemma):
    t, dflash, dspark = gemma
    prompt = [11, 22, 33, 44, 55]
    want = Engine(t).generate(prompt, 60).token_ids
    for head in (dflash, dspark):
        seen = set()
        for seed in range(2):
            res = Engine(t, Oracle(head, want, len(prompt), seed)).generate(prompt, 60)
            assert res.token_ids == want
            seen.update(res.accept_lengths)
        assert len(seen) >= 3 and max(seen) > 3, sorted(seen)


@pytest.mark.parametrize("name", ["target", "text"])
def test_a_tree_forward_is_each_path_fed_alone_and_keeps_any_path(gemma_dir, name):
    """Sliding and full layers with a tree mask, shared-K/V layers reusing them, rows roped at their depth;
    the prompt crosses the window."""
    t = load_target(str(gemma_dir / name))
    assert t.check_trees() == ""
    tree = tiny.hand_tree()
    for row in range(len(tree.depths)):
        tiny.assert_tree_row_is_its_path(t, list(range(30, 30 + 2 * WINDOW + 3)), tree, row)


def test_trees_are_lossless(gemma):
    t, dflash, dspark = gemma
    prompt = [11, 22, 33, 44, 55]
    want = Engine(t).generate(prompt, 40).token_ids
    for head in (dflash, dspark):
        eng = Engine(t, tiny.OracleHead(head, want, len(prompt), corrupt=0.25, seed=1), max_draft=5, tree=12)
        assert eng.tree == 12, eng.tree_note
        res = eng.generate(prompt, 40)
        assert res.token_ids == want, head.kind
        assert any(res.trees), head.kind


@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_drafting_pass_equals_training_pass(kind, gemma):
    """Windowed (DFlash sliding layers) and Gemma (DSpark) layers agree between the cached drafting
    pass and the one-shot training pass."""
    t, dflash, dspark = gemma
    head = dflash if kind == "dflash" else dspark
    ids = mx.array([[7, 30, 12, 99, 5, 61, 8, 200, 14, 33, 41, 77, 90, 13, 6, 250, 18, 22, 9, 100]])
    _, taps = t(ids, t.make_cache(), head.config.target_layer_ids)
    cache, rows, anchors, seen = head.make_cache(), [], [10, 14, 15, 19], 0
    for a in anchors:
        rows.append(head.block_hidden(cache, taps[:, seen:a], int(ids[0, a].item())))
        seen = a
    bs, anchor_arr = head.config.block_size, mx.array(anchors)
    block = head.embed(block_embed_ids(ids[0][anchor_arr], bs, head.config.mask_token_id))
    one_shot = head.train_blocks(block, head.fuse(taps), anchor_arr, training_mask(anchor_arr, taps.shape[1], bs))
    assert mx.allclose(mx.stack(rows), one_shot, atol=2e-4), float(mx.abs(mx.stack(rows) - one_shot).max())


def test_gemma_heads_as_published(gemma, gemma_dir, tmp_path):
    t, dflash, dspark = gemma
    attn = dspark.layers[0].self_attn
    assert "v_proj" not in attn and attn.scale == 1.0 and dspark.config.head_dim == 32  # global_head_dim
    assert type(dspark.rope).__name__ == "ProportionalRoPE" and dspark.softcap == 30.0
    assert mx.allclose(dspark.embed(mx.array([5])), dspark.embed_tokens(mx.array([5])) * 8.0)  # x sqrt(64)
    assert float(dspark.layers[0].layer_scalar[0]) == pytest.approx(0.9)  # read from the checkpoint
    assert dflash._attention == ((True, 6), (False, None), (True, 6))  # sliding layers: causal, window 6
    assert mx.allclose(dflash.embed(mx.array([5])), t.embed(mx.array([5])))  # the target's scaled embedding
    # DeepSpec writes the text config's own model_type
    alt = shutil.copytree(gemma_dir / "dspark", tmp_path / "text-type")
    cfg = json.loads((alt / "config.json").read_text())
    (alt / "config.json").write_text(json.dumps(dict(cfg, model_type="gemma4_text")))
    assert load_dspark(str(alt), t).max_drafts == 7
    # strict names: a layer_scalar missing, or a v_proj that a K = V head has no place for
    w = mx.load(str(gemma_dir / "dspark" / "model.safetensors"))
    for edit, words in ((lambda w: w.pop("layers.1.layer_scalar"), "missing 1 tensor"),
                        (lambda w: w.update({"layers.0.self_attn.v_proj.weight": w["layers.0.self_attn.k_proj.weight"]}),
                         "unexpected 1 tensor")):
        bad = shutil.copytree(gemma_dir / "dspark", tmp_path / words.replace(" ", "-"))
        ww = dict(w)
        edit(ww)
        mx.save_safetensors(str(bad / "model.safetensors"), ww)
        with pytest.raises(SpecError, match=words):
            load_dspark(str(bad), t)
    nowin = shutil.copytree(gemma_dir / "dflash", tmp_path / "no-window")
    cfg = json.loads((nowin / "config.json").read_text())
    (nowin / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if k != "sliding_window"}))
    with pytest.raises(SpecError, match="no sliding_window"):
        load_dflash(str(nowin), t)


def test_heads_of_the_other_family_are_refused(gemma, gemma_dir, tiny_dir, qwen3):
    t = gemma[0]
    with pytest.raises(SpecError, match="Gemma-4 target needs a Gemma4DSparkModel head"):
        load_dspark(str(tiny_dir / "dspark-qwen3"), t)
    with pytest.raises(SpecError, match="is a Gemma-4 head"):
        load_dspark(str(gemma_dir / "dspark"), qwen3)
    with pytest.raises(SpecError, match="Gemma-4 target needs"):
        load_dspark(str(tiny_dir / "dspark-qwen3")).bind(t)
    with pytest.raises(SpecError, match="vocabulary"):  # DFlash heads name no family: their sizes differ
        load_dflash(str(tiny_dir / "dflash-qwen3"), t)
    with pytest.raises(SpecError, match="vocabulary"):
        load_dflash(str(gemma_dir / "dflash"), qwen3)
    with pytest.raises(SpecError, match="not a DFlash head"):
        load_dflash(str(gemma_dir / "dspark"), t)


def test_preset_is_supported():
    p = get_preset("gemma4")
    assert p.supported and "GB" in p.note
    assert (p.target, p.dspark, p.dflash) == ("mlx-community/gemma-4-12B-it-8bit", "deepseek-ai/dspark_gemma4_12b_block7",
                                              "z-lab/gemma4-12B-it-DFlash")


def test_distillation_data_of_a_gemma_target_is_its_greedy_answer(gemma, tmp_path):
    from spec.train import distill

    t = gemma[0]
    prompts = [{"prompt": "a question for gemma", "domain": "chat"}, {"prompt": "and another", "domain": "math"}]
    distill.build_data(t, tmp_path, prompts, [1, 5], max_new_tokens=3 * WINDOW, batch=8)
    for p, seq in zip(prompts, distill.load_data(tmp_path)):
        assert seq.ids[seq.prompt_len :].tolist() == Engine(t).generate(p["prompt"], 3 * WINDOW).token_ids
        _, fresh = t(mx.array([seq.ids.tolist()]), t.make_cache(), [1, 5])
        assert mx.allclose(fresh[0].astype(mx.float16), mx.array(seq.taps), atol=2e-2)
