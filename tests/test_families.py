"""Every mlx-lm family whose layers keep an ArraysCache (recurrent or short-conv state), as a tiny random target
(tests/families.json: each family's own mlx-lm ModelArgs fields, shrunk): load_target either accepts it, and then
rows taken back out of its recurrent layers leave them exactly as feeding the kept tokens one by one would, and it
verifies trees (or says why it verifies chains), or it refuses the family with one SpecError that says why."""

import json
from pathlib import Path

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten

import tiny
from spec.errors import SpecError
from spec.target import load_target

FAMILIES = json.loads((Path(__file__).parent / "families.json").read_text())
NAMES = sorted(k for k in FAMILIES if not k.startswith("_"))


def build(folder: Path, cfg: dict) -> Path:
    """tiny.make_from_config; for families whose embedding is neither embed_tokens nor embeddings (Bailing's
    word_embeddings, LongCat's n-gram embedding) the same random f32 folder without the embedding sharpened.
    A config mlx-lm cannot build at all skips the family."""
    from mlx_lm.utils import _get_classes

    try:
        model_cls, args_cls = _get_classes(cfg)
        model_cls(args_cls.from_dict(dict(cfg)))
    except Exception as e:  # mlx-lm's own classes refuse this config
        pytest.skip(f"mlx-lm cannot build this config: {type(e).__name__}: {e}")
    try:
        return tiny.make_from_config(folder, cfg)
    except AttributeError:
        mx.random.seed(0)
        model = model_cls(args_cls.from_dict(dict(cfg)))
        folder.mkdir(parents=True, exist_ok=True)
        mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
        (folder / "config.json").write_text(json.dumps(cfg))
        tiny.write_tokenizer(folder)
        return folder


@pytest.mark.parametrize("family", NAMES)
def test_family_is_accepted_and_rolls_back_exactly_or_refused_with_its_reason(family, tmp_path):
    entry = FAMILIES[family]
    folder = build(tmp_path / "t", entry["config"])
    expect, bug = entry["expect"], entry.get("known_bug")
    if expect == "accepted":
        t = load_target(str(folder))
        assert t.recurrent, "accepted, but no recurrent layer was found"
        tiny.assert_rollback_exact(t, k=4, prompt_len=12)
        note = t.check_trees()  # trees run path by path through its recurrent layers, or it says why not
        assert note == entry.get("trees", ""), note
        return
    try:
        load_target(str(folder))
    except SpecError as e:
        assert expect in str(e), f"refused, but not with {expect!r}: {e}"
        assert not bug, f"known_bug no longer reproduces (now a SpecError: {e}): update tests/families.json"
        return
    except Exception as e:
        if bug:
            pytest.xfail(f"known bug: {bug} ({type(e).__name__}: {e})")
        raise
    pytest.fail(f"{family} was accepted; families.json expects a refusal containing {expect!r}")
