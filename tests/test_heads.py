"""How a head's config and tensors are read: z-lab's key precedence and defaults, DeepSpec's confidence
cut, DSpark heads that borrow the target's embedding and output layer, one table of head classes."""

import json
import shutil

import mlx.core as mx
import pytest

from spec import greedy_generate, load_dflash, load_dspark, speculative_generate
from spec.errors import SpecError
from spec.heads.backbone import default_taps, layer_attention
from spec.heads.dflash import DFlashConfig, DFlashDraftModel
from spec.heads.dspark import confident_prefix
from spec.heads.dspark_gemma4 import Gemma4DSparkDraftModel
from spec.heads.registry import HEADS, head_class
from spec.loop.engine import Engine
from spec.loop.verify import Sampling

HEAD = {"hidden_size": 64, "num_hidden_layers": 5, "num_attention_heads": 4, "intermediate_size": 128,
        "vocab_size": 272, "num_target_layers": 36}


def test_dflash_config_takes_dflash_config_first_then_the_top_level():
    both = dict(HEAD, block_size=8, mask_token_id=3, target_layer_ids=[1, 2],
                dflash_config={"block_size": 16, "mask_token_id": 5, "target_layer_ids": [4, 5, 6]})
    c = DFlashConfig.from_dict(both)
    assert (c.block_size, c.mask_token_id, c.target_layer_ids) == (16, 5, (4, 5, 6))
    top = DFlashConfig.from_dict(dict(HEAD, block_size=8, mask_token_id=3, dflash_config={}))
    assert (top.block_size, top.mask_token_id) == (8, 3)


def test_dflash_defaults_are_z_labs():
    c = DFlashConfig.from_dict(dict(HEAD, dflash_config={"mask_token_id": 3}))
    assert c.block_size == 16 and c.target_layer_ids == (1, 9, 17, 25, 33)  # one tap per draft layer
    assert c.input_embedding_scale is None and c.output_multiplier == 1.0 and c.final_logit_softcapping is None
    assert default_taps(48, 5) == [1, 12, 23, 34, 45] and default_taps(36, 1) == [18] and default_taps(60, 6)[-1] == 57
    scaled = DFlashConfig.from_dict(dict(HEAD, dflash_config={"mask_token_id": 3, "output_multiplier": 0.5,
                                                              "final_logit_softcapping": 20.0}))
    assert (scaled.output_multiplier, scaled.final_logit_softcapping) == (0.5, 20.0)


def test_sliding_layers_are_causal_unless_is_causal_says_otherwise():
    mixed = dict(HEAD, num_hidden_layers=2, mask_token_id=3, layer_types=["sliding_attention", "full_attention"],
                 sliding_window=4)
    assert layer_attention(DFlashConfig.from_dict(mixed)) == [(True, 4), (False, None)]
    assert layer_attention(DFlashConfig.from_dict(dict(mixed, is_causal=True))) == [(True, 4), (True, None)]
    assert layer_attention(DFlashConfig.from_dict(dict(mixed, dflash_config={"causal": False}))) == [(False, 4),
                                                                                                     (False, None)]


def test_the_draft_is_cut_at_the_first_unconfident_slot():
    """DeepSpec's released rule: each slot's own survival against the threshold, not the running product."""
    survival = mx.array([0.9, 0.6, 0.6, 0.9])
    assert confident_prefix(survival, 0.5) == 4  # the product (0.9, 0.54, 0.32, ...) would keep 2
    assert confident_prefix(mx.array([0.9, 0.4, 0.9]), 0.5) == 1
    assert confident_prefix(mx.array([0.3, 0.9]), 0.5) == 0  # then the round is a plain target step


def test_a_confidence_cut_to_nothing_stays_lossless(tiny_dir, qwen3):
    head = load_dspark(str(tiny_dir / "dspark-qwen3"), qwen3)
    res = Engine(qwen3, head, confidence_threshold=0.999).generate([9, 8, 7], 12)
    assert res.token_ids == greedy_generate(qwen3, [9, 8, 7], 12).token_ids
    assert 0 in res.drafted


def test_a_dspark_head_without_embedding_and_lm_head_borrows_the_targets(tiny_dir, qwen3, tmp_path):
    """Packaged without its frozen copies (vLLM / speculators do so), it drafts exactly as the same head
    whose copies are the target's own weights."""
    own = tmp_path / "own"
    shutil.copytree(tiny_dir / "dspark-qwen3", own)
    w = mx.load(str(own / "model.safetensors"))
    w["embed_tokens.weight"] = qwen3.inner.embed_tokens.weight
    w["lm_head.weight"] = qwen3.outer.lm_head.weight
    mx.save_safetensors(str(own / "model.safetensors"), w)
    bare = tmp_path / "bare"
    shutil.copytree(own, bare)
    mx.save_safetensors(str(bare / "model.safetensors"),
                        {k: v for k, v in w.items() if k not in ("embed_tokens.weight", "lm_head.weight")})
    a, b = load_dspark(str(own), qwen3), load_dspark(str(bare), qwen3)
    assert "embed_tokens" in a and "embed_tokens" not in b and "lm_head" not in b
    for h in (a, b):
        h.use_draft_vocab(None)
    ids = [9, 8, 7, 6]
    _, taps = qwen3(mx.array([ids]), qwen3.make_cache(), b.config.target_layer_ids)
    drafts = [h.propose(h.make_cache(), taps, 5, 7, Sampling(), None)[0].tolist() for h in (a, b)]
    assert drafts[0] == drafts[1]
    assert speculative_generate(qwen3, b, ids, 12).token_ids == greedy_generate(qwen3, ids, 12).token_ids
    with pytest.raises(SpecError, match="not bound"):
        load_dspark(str(bare)).embed(mx.array([1]))


def test_one_table_decides_the_head_class():
    assert {a: h.kind for a, h in HEADS.items()} == {
        "DFlashDraftModel": "dflash", "Qwen3DSparkModel": "dspark", "Gemma4DSparkModel": "dspark"}
    assert head_class({"architectures": ["Gemma4DSparkModel"], "model_type": "gemma4_text"}, "dspark", "h").model is Gemma4DSparkDraftModel
    assert head_class({}, "dflash", "h").model is DFlashDraftModel  # older z-lab heads name no class
    with pytest.raises(SpecError, match="not a DSpark head"):
        head_class({"architectures": ["DFlashDraftModel"]}, "dspark", "h")
    with pytest.raises(SpecError, match="model_type 'llama'"):
        head_class({"architectures": ["Qwen3DSparkModel"], "model_type": "llama"}, "dspark", "h")


def test_a_head_config_naming_code_still_loads(tiny_dir, qwen3, tmp_path):
    folder = tmp_path / "h"
    shutil.copytree(tiny_dir / "dflash-qwen3", folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(auto_map={"AutoModel": "dflash.DFlashDraftModel"}, trust_remote_code=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    assert load_dflash(str(folder), qwen3).max_drafts == 7
