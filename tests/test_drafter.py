"""The drafting pass over a growing context cache equals the one-shot training pass over many blocks."""

import mlx.core as mx
import pytest

from spec.heads.backbone import block_embed_ids, training_mask
from spec.heads.registry import load_dflash, load_dspark


@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_incremental_context_equals_training_pass(kind, tiny_dir, qwen3):
    t = qwen3
    loader = load_dflash if kind == "dflash" else load_dspark
    head = loader(str(tiny_dir / f"{kind}-qwen3"), t)
    ids = mx.array([[7, 30, 12, 99, 5, 61, 8, 200, 14, 33, 41, 77, 90, 13, 6, 250, 18, 22, 9, 100]])
    _, taps = t(ids, t.make_cache(), head.config.target_layer_ids)
    cache, rows, anchors = head.make_cache(), [], [10, 14, 15, 19]
    seen = 0
    for a in anchors:  # context = every token before the anchor, fed as it is committed
        rows.append(head.block_hidden(cache, taps[:, seen:a], int(ids[0, a].item())))
        seen = a
    inc = mx.stack(rows)
    bs = head.config.block_size
    anchor_arr = mx.array(anchors)
    block = head.embed(block_embed_ids(ids[0][anchor_arr], bs, head.config.mask_token_id))
    ctx = head.fuse(taps)
    one_shot = head.train_blocks(block, ctx, anchor_arr, training_mask(anchor_arr, ctx.shape[1], bs))
    assert mx.allclose(inc, one_shot, atol=2e-4), float(mx.abs(inc - one_shot).max())
