"""End to end on the pocket preset with the heads we ship: loads, races, stays lossless."""

import pytest

from spec.heads.registry import load_dflash, load_dspark
from spec.loop.engine import Engine
from spec.presets import resolve
from spec.prompts import load_prompts
from spec.target import load_target

pytestmark = pytest.mark.pocket


@pytest.fixture(scope="module")
def pocket():
    t = load_target(resolve("pocket", "target"))
    return t, load_dspark(resolve("pocket", "dspark"), t), load_dflash(resolve("pocket", "dflash"), t)


def test_shipped_heads_are_lossless_and_accept_drafts(pocket):
    from pathlib import Path

    t, dspark, dflash = pocket
    prompt = load_prompts(Path(__file__).parent.parent / "assets" / "prompts" / "code.jsonl")[0]["prompt"]
    want = Engine(t).generate(prompt, 24)
    assert want.text.strip()
    for head in (dspark, dflash):
        res = Engine(t, head).generate(prompt, 24)
        assert res.token_ids == want.token_ids
        assert sum(a > 1 for a in res.accept_lengths) > 0  # trained heads get drafts accepted


def test_dspark_checkpoint_is_complete_in_the_published_format(pocket):
    import json
    from pathlib import Path

    import mlx.core as mx

    t, dspark, _ = pocket
    folder = Path(resolve("pocket", "dspark"))
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["architectures"] == ["Qwen3DSparkModel"] and cfg["model_type"] == "qwen3"
    w = mx.load(str(folder / "model.safetensors"))
    assert mx.array_equal(w["embed_tokens.weight"], t.inner.embed_tokens.weight).item()
    shipped = mx.load(str(Path(__file__).parent.parent / "assets" / "pocket" / "dspark" / "model.safetensors"))
    assert "embed_tokens.weight" not in shipped and "lm_head.weight" not in shipped


def test_shipped_heads_with_a_lookup_branch_stay_lossless_and_land_more_on_an_edit(pocket):
    """Prompt lookup's guess as one more branch of each head's round (spec.loop.lookup_branch): identical to
    greedy at T = 0, more tokens a round than the head alone on a text to change, and a sample at T > 0."""
    from pathlib import Path

    import numpy as np

    from spec.loop.verify import Sampling

    t, dspark, dflash = pocket
    prompt = load_prompts(Path(__file__).parent.parent / "assets" / "prompts" / "edit.jsonl")[0]["prompt"]
    want = Engine(t).generate(prompt, 40)
    for head in (dspark, dflash):
        alone = Engine(t, head, max_draft=4, tree=0).generate(prompt, 40)
        both = Engine(t, head, max_draft=4, tree=0, lookup_branch=True).generate(prompt, 40)
        assert both.token_ids == want.token_ids
        assert np.mean(both.accept_lengths) > np.mean(alone.accept_lengths), (alone.accept_lengths, both.accept_lengths)
        sampled = Engine(t, head, max_draft=4, tree=0, lookup_branch=True,
                         sampling=Sampling(0.7, seed=3)).generate(prompt, 24)
        assert sampled.text.strip() and max(sampled.drafted) > 4  # lookup rows were verified beside the head's
