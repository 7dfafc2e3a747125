"""Loaders accept the published formats as-is and refuse bad input with one clear message."""

import json
import shutil

import mlx.core as mx
import pytest
import tiny

from spec import greedy_generate, load_dflash, load_dflash_pair, load_dspark, load_pair, speculative_generate
from spec.errors import SpecError
from spec.heads.backbone import default_taps
from spec.loop.engine import Engine
from spec.target import load_target


def copy_head(src, dst, edit_config=None, edit_weights=None):
    shutil.copytree(src, dst)
    if edit_config:
        cfg = json.loads((dst / "config.json").read_text())
        edit_config(cfg)
        (dst / "config.json").write_text(json.dumps(cfg))
    if edit_weights:
        w = mx.load(str(dst / "model.safetensors"))
        edit_weights(w)
        mx.save_safetensors(str(dst / "model.safetensors"), w)
    return dst


def test_targets_and_taps(qwen3, llama):
    for t in (qwen3, llama):
        logits, hidden = t(mx.array([[5, 6, 7]]), t.make_cache(), taps=(-1, 0, 5))
        assert logits.shape == (1, 3, t.vocab_size) and hidden.shape == (1, 3, 3 * t.hidden_size)
        # the last tap before the norm reproduces the model's own logits: the walk is the model's
        ref = t.model(mx.array([[5, 6, 7]]))
        assert mx.allclose(ref, logits, atol=1e-4)
        assert mx.allclose(hidden[..., : t.hidden_size], t.embed(mx.array([[5, 6, 7]])))


def test_cache_trim_matches_fresh_forward(qwen3):
    t = qwen3
    c = t.make_cache()
    t(mx.array([[5, 6, 7, 8]]), c)
    t(mx.array([[9, 10, 11]]), c)
    t.trim(c, 2)  # keep 5 6 7 8 9
    a, _ = t(mx.array([[12]]), c)
    b, _ = t(mx.array([[5, 6, 7, 8, 9, 12]]), t.make_cache())
    assert mx.allclose(a[0, -1], b[0, -1], atol=1e-4)


def test_published_formats_load(tiny_dir, qwen3):
    df = load_dflash(str(tiny_dir / "dflash-qwen3"), qwen3)
    assert df.config.block_size == 8 and df.config.target_layer_ids == (1, 3) and df.max_drafts == 7
    ds = load_dspark(str(tiny_dir / "dspark-qwen3"), qwen3)
    assert ds.max_drafts == 7 and ds.has_markov and ds.has_confidence
    t, d = load_pair(str(tiny_dir / "qwen3"), str(tiny_dir / "dspark-qwen3"))
    t2, d2 = load_dflash_pair(str(tiny_dir / "qwen3"), str(tiny_dir / "dflash-qwen3"))
    want = greedy_generate(t, [9, 8, 7], 12).token_ids
    assert speculative_generate(t, d, [9, 8, 7], 12).token_ids == want
    assert speculative_generate(t2, d2, [9, 8, 7], 12, max_draft=3).token_ids == want


def test_block_size_at_top_level_and_bf16(tmp_path, tiny_dir, qwen3):
    cfg = json.loads((tiny_dir / "qwen3" / "config.json").read_text())
    tiny.make_dflash_head(tmp_path / "old", cfg, nested=False, block_size=16)
    assert load_dflash(str(tmp_path / "old"), qwen3).max_drafts == 15
    bf16 = copy_head(tmp_path / "old", tmp_path / "bf16",
                     edit_weights=lambda w: w.update({k: v.astype(mx.bfloat16) for k, v in w.items()}))
    head = load_dflash(str(bf16), qwen3)
    assert head.fc.weight.dtype == mx.float32  # half-precision heads run in f32 on the CPU


def test_default_taps():
    assert default_taps(36) == [1, 9, 17, 25, 33]  # z-lab's rule, 5 draft layers
    assert default_taps(30) == [1, 8, 14, 20, 27]


def test_drafter_quantization(tiny_dir, qwen3):
    head = load_dflash(str(tiny_dir / "dflash-qwen3"), qwen3, drafter_bits=4)
    assert "scales" in head.layers[0].mlp.gate_proj
    want = greedy_generate(qwen3, [3, 4, 5], 10).token_ids
    assert speculative_generate(qwen3, head, [3, 4, 5], 10).token_ids == want


BAD_HEADS = {
    "vocab": (lambda c: c.update(vocab_size=300), None, "vocabulary"),
    "hidden": (lambda c: c.update(hidden_size=32, head_dim=8), None, "hidden size"),
    "taps": (lambda c: c["dflash_config"].update(target_layer_ids=[1, 9]), None, "outside the target"),
    "layers": (lambda c: c.update(num_target_layers=36), None, "36-layer"),
    "missing": (None, lambda w: w.pop("layers.1.mlp.up_proj.weight"), "missing 1 tensor"),
    "extra": (None, lambda w: w.update({"lm_head.weight": mx.zeros((4, 4))}), "unexpected 1 tensor"),
    "shape": (None, lambda w: w.update({"fc.weight": mx.zeros((64, 64))}), "shapes"),
}


@pytest.mark.parametrize("case", sorted(BAD_HEADS))
def test_bad_dflash_heads_are_refused(case, tmp_path, tiny_dir, qwen3):
    edit_c, edit_w, words = BAD_HEADS[case]
    folder = copy_head(tiny_dir / "dflash-qwen3", tmp_path / case, edit_c, edit_w)
    with pytest.raises(SpecError, match=words):
        load_dflash(str(folder), qwen3)


def test_bad_dspark_heads_are_refused(tmp_path, tiny_dir, qwen3):
    f = copy_head(tiny_dir / "dspark-qwen3", tmp_path / "v", lambda c: c.update(vocab_size=300),
                  lambda w: w.update({k: mx.zeros((300,) + v.shape[1:]) for k, v in w.items()
                                      if k in ("embed_tokens.weight", "lm_head.weight", "markov_head.markov_w1.weight",
                                               "markov_head.markov_w2.weight")}))
    with pytest.raises(SpecError, match="vocabulary"):
        load_dspark(str(f), qwen3)
    with pytest.raises(SpecError, match="not a DSpark head"):
        load_dspark(str(tiny_dir / "dflash-qwen3"), qwen3)
    with pytest.raises(SpecError, match="not a DFlash head"):
        load_dflash(str(tiny_dir / "dspark-qwen3"), qwen3)


def test_bad_requests(tiny_dir, qwen3):
    head = load_dflash(str(tiny_dir / "dflash-qwen3"), qwen3)
    eng = Engine(qwen3, head)
    with pytest.raises(SpecError, match="empty"):
        eng.start("   ")
    with pytest.raises(SpecError, match="empty"):
        eng.start([])
    with pytest.raises(SpecError, match="max new tokens"):
        eng.start([5, 6], 0)
    with pytest.raises(SpecError, match="context"):
        eng.start([5] * 600, 10)
    with pytest.raises(SpecError, match="max draft"):
        Engine(qwen3, head, max_draft=99)
    with pytest.raises(SpecError, match="not found"):
        load_target(str(tiny_dir / "nope"))
    with pytest.raises(SpecError, match="needs remote code.*model_file"):
        bad = copy_head(tiny_dir / "qwen3", tiny_dir / "remote", lambda c: c.update(model_file="modeling.py"))
        load_target(str(bad))
    # the engine still works after all of that
    assert greedy_generate(qwen3, [5, 6], 3).finish_reason in ("length", "eos")
