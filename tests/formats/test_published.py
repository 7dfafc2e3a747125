"""Every checkpoint our presets and README name, as published (shrunk): the fixtures' facts, the loaders,
lossless decoding, the original tool's call sequence and the CLI."""

import json
import math
import subprocess
import sys

import mlx.core as mx
import numpy as np
import pytest

import shrunk
import tiny
from spec import (DFLASH_PRESETS, PRESETS, dflash_generate, greedy_generate, load_dflash, load_dspark,
                  speculative_generate)
from spec.errors import SpecError
from spec.target import load_target

PROMPT = "Why is the sky blue?"
N = 8  # new tokens per check: the shrunk targets keep their 151,936 / 262,144-token 8-bit output layers
K = 3  # drafts verified per round: the block still runs whole, fewer rows go through the output layer
REPOS = sorted((*shrunk.TARGETS, *shrunk.HEADS))


def load_head(path, target=None):
    cfg = json.loads((path / "config.json").read_text())
    return (load_dflash if "DFlashDraftModel" in cfg["architectures"] else load_dspark)(str(path), target)


def test_every_hub_preset_and_named_head_has_a_fixture():
    for p in PRESETS.values():
        if p.name != "pocket":
            heads = {h for h in (p.dspark, p.dflash) if h}  # an empty head: none published, and the preset says why
            assert p.target in shrunk.TARGETS and heads <= set(shrunk.HEADS) and heads, p.name
            assert len(heads) == 2 or p.missing, p.name
    assert {"z-lab/Qwen3-8B-DFlash-b16", "deepseek-ai/dspark_qwen3_8b_block7"} <= set(shrunk.HEADS)
    assert sorted(p.name for p in shrunk.PUBLISHED.iterdir()) == sorted(shrunk.folder_of(r).name for r in REPOS)


@pytest.mark.parametrize("repo", REPOS)
def test_each_fixture_names_its_source_and_status(repo):
    text = (shrunk.folder_of(repo) / "SOURCE.md").read_text()
    assert text.startswith(f"# {repo}")
    assert any(word in text for word in ("VERIFIED", "DERIVED", "RECONSTRUCTED"))
    assert "@" in text or "http" in text or "index" in text  # a commit, an address or the index it came from


@pytest.mark.parametrize("repo", [r for r in shrunk.HEADS if shrunk.published_tensors(r)])
def test_tensor_names_shapes_and_dtypes_are_the_published_ones(repo):
    """The names and shapes we write (and load strictly) are the published checkpoint's, at full size."""
    published = shrunk.published_tensors(repo)
    ours = tiny.head_shapes(shrunk.published_config(repo))
    assert set(ours) == set(published)
    assert {n: list(s) for n, s in ours.items()} == {n: t["shape"] for n, t in published.items()}
    assert {t["dtype"] for n, t in published.items() if n not in ("d2t", "t2d")} == {"BF16"}


def _keys(cfg, prefix=""):
    out = set()
    for k, v in cfg.items():
        out.add(prefix + k)
        if isinstance(v, dict):
            out |= _keys(v, f"{prefix}{k}.")
    return out


@pytest.mark.parametrize("repo", REPOS)
def test_shrinking_keeps_every_key_and_changes_only_sizes(repo):
    cfg = shrunk.published_config(repo)
    small = shrunk.shrink(cfg)
    assert _keys(small) == _keys(cfg)
    nested = {"text_config", "rope_parameters", "transformer_layer_config"}  # shrunk key by key, recursively
    for key in set(cfg) - set(shrunk.SHRINK) - nested:
        assert small[key] == cfg[key], key
    assert "auto_map" not in cfg or small["auto_map"] == {"AutoModel": "dflash.DFlashDraftModel"}


# mlx-lm module that loads each target (gemma4_unified: mlx-lm's remap), and its recurrent layers' mixer
FAMILIES = {"mlx-community/Qwen3-4B-8bit": ("qwen3", None), "mlx-community/Qwen3-8B-8bit": ("qwen3", None),
            "mlx-community/gemma-4-12B-it-8bit": ("gemma4", None), "Qwen/Qwen3.5-4B": ("qwen3_5", "GatedDeltaNet"),
            "mlx-community/Qwen3.5-4B-MLX-4bit": ("qwen3_5", "GatedDeltaNet"),
            "Qwen/Qwen3.5-27B": ("qwen3_5", "GatedDeltaNet"), "Qwen/Qwen3.5-35B-A3B": ("qwen3_5_moe", "GatedDeltaNet"),
            "Qwen/Qwen3-30B-A3B": ("qwen3_moe", None), "openai/gpt-oss-20b": ("gpt_oss", None)}


@pytest.mark.parametrize("repo", shrunk.TARGETS)
def test_targets_load_as_published(repo, shrunk_targets):
    t, cfg = shrunk_targets[repo], shrunk.published_config(repo)
    text = cfg.get("text_config") or cfg
    assert t.num_layers == text["num_hidden_layers"] and t.vocab_size == text["vocab_size"]
    if "quantization" in cfg:
        assert "scales" in t.inner.layers[0].mlp.down_proj  # 8-bit, as mlx-community ships it
    family, mixer = FAMILIES[repo]
    assert t.family == family
    types = text.get("layer_types") or []
    if mixer:  # every linear_attention layer is a gated DeltaNet we tape; full attention every 4th
        assert sorted(t.recurrent) == [i for i, kind in enumerate(types) if kind == "linear_attention"]
        assert set(t.recurrent.values()) == {mixer} and types[3] == "full_attention"
    else:
        assert not t.recurrent
    ids = mx.array([[5, 6, 7, 8]])
    logits, taps = t(ids, t.make_cache(), taps=(0, t.num_layers - 2))
    assert mx.allclose(logits, t.model(ids), atol=1e-3)  # our walk is the model's own
    assert taps.shape == (1, 4, 2 * t.hidden_size)


@pytest.fixture(scope="module")
def greedy(shrunk_targets):
    """Plain greedy decoding of PROMPT on each shrunk target: what every head must reproduce."""
    return {repo: greedy_generate(t, PROMPT, N).token_ids for repo, t in shrunk_targets.items()}


@pytest.mark.parametrize("repo", sorted(shrunk.HEADS))
def test_heads_load_and_decode_losslessly(repo, shrunk_dir, shrunk_targets, greedy):
    target = shrunk_targets[shrunk.HEADS[repo]]
    head = load_head(shrunk_dir / repo, target)
    cfg = shrunk.published_config(repo)
    assert list(head.config.target_layer_ids) == shrunk.head_taps(cfg)
    assert head.config.block_size == cfg.get("block_size", (cfg.get("dflash_config") or {}).get("block_size"))
    assert head.config.mask_token_id == (cfg.get("dflash_config") or cfg)["mask_token_id"]
    res = speculative_generate(target, head, PROMPT, N, max_draft=K)
    assert res.token_ids == greedy[shrunk.HEADS[repo]] and sum(res.drafted) > 0
    sampled = speculative_generate(target, head, PROMPT, 4, max_draft=K, temperature=0.8, seed=3)
    assert len(sampled.token_ids) == 4 or sampled.finish_reason == "eos"


def first_block_logits(target, head, prompt=PROMPT):
    """The head's logits for its first block after the prompt (what drafting reads)."""
    ids = target.encode_chat(prompt)
    logits, taps = target(mx.array([ids]), target.make_cache(), head.config.target_layer_ids, last_only=True)
    anchor = int(mx.argmax(logits[0, -1]).item())
    return head.logits(head.block_hidden(head.make_cache(), taps, anchor))


GEMMA_DFLASH = "z-lab/gemma4-12B-it-DFlash"


def _sliding(cfg):
    cfg.update(layer_types=["sliding_attention"] * 4 + ["full_attention"], sliding_window=8, use_sliding_window=True)


def _nested(cfg):
    cfg["dflash_config"].update(block_size=cfg.pop("block_size"))


def _scale(cfg):
    cfg["input_embedding_scale"] = math.sqrt(cfg["hidden_size"])  # z-lab's newer key, set to Gemma's own scale


def _no_softcap(cfg):
    cfg.pop("final_logit_softcapping")


READINGS = {"as reconstructed": None, "sliding layers": _sliding, "keys in dflash_config": _nested,
            "explicit embedding scale": _scale, "no head softcap": _no_softcap}


@pytest.mark.parametrize("reading", READINGS)
def test_gemma_dflash_head_under_each_reading_of_its_unknown_config(reading, tmp_path, shrunk_targets, greedy):
    """z-lab's Gemma-4 12B head config is not public: every reading loads and decodes losslessly, and the
    readings that mean the same thing (the target's sqrt(H) scale, the target's softcap 30) draft the same."""
    target = shrunk_targets[shrunk.HEADS[GEMMA_DFLASH]]
    head = load_dflash(str(shrunk.build(GEMMA_DFLASH, tmp_path / "h", edit=READINGS[reading])), target)
    assert head.config.block_size == 16
    if reading == "sliding layers":
        assert head._attention[0] == (True, 8) and head._attention[4] == (False, None)
    if reading in ("as reconstructed", "sliding layers"):  # the others draft as "as reconstructed" does
        assert speculative_generate(target, head, PROMPT, N, max_draft=K).token_ids == greedy[shrunk.HEADS[GEMMA_DFLASH]]
    else:
        same = load_dflash(str(shrunk.build(GEMMA_DFLASH, tmp_path / "ref")), target)
        ours, ref = first_block_logits(target, head), first_block_logits(target, same)
        assert mx.allclose(ours, ref, atol=1e-3) and float(mx.abs(ref).max()) > 1.0


@pytest.mark.parametrize("scalar", [1.0, 0.5])
def test_gemma_dspark_layer_scalar_is_read_from_the_checkpoint(scalar, tmp_path, shrunk_targets, greedy):
    """DeepSpec stores layer_scalar (bf16 [1], 1.0 by its code; no public file shows the value): both a
    1.0 and another value load as stored, and decoding stays lossless."""
    repo = "deepseek-ai/dspark_gemma4_12b_block7"
    target = shrunk_targets[shrunk.HEADS[repo]]
    folder = shrunk.build(repo, tmp_path / "h")
    w = mx.load(str(folder / "model.safetensors"))
    w.update({k: mx.array([scalar], dtype=mx.bfloat16) for k in w if k.endswith("layer_scalar")})
    mx.save_safetensors(str(folder / "model.safetensors"), w)
    head = load_dspark(str(folder), target)
    assert all(float(layer.layer_scalar[0]) == scalar for layer in head.layers)
    assert speculative_generate(target, head, PROMPT, N, max_draft=K).token_ids == greedy[shrunk.HEADS[repo]]


GPT_OSS_DFLASH = "z-lab/gpt-oss-20b-DFlash"


def _gpt_taps_count(cfg):
    cfg["num_target_layers"] = 24


def _gpt_full_layers(cfg):
    cfg["layer_types"] = ["full_attention"] * cfg["num_hidden_layers"]


def _gpt_yarn(cfg):  # the target's own YaRN scaling (a vLLM test implies the reference drafter uses it)
    cfg["rope_scaling"] = dict(shrunk.published_config("openai/gpt-oss-20b")["rope_scaling"])


GPT_READINGS = {"as quoted": None, "num_target_layers 24": _gpt_taps_count, "layer_types all full": _gpt_full_layers,
                "target's YaRN rope": _gpt_yarn}


@pytest.mark.parametrize("reading", GPT_READINGS)
def test_gpt_oss_dflash_head_under_each_reading_of_its_partial_config(reading, tmp_path, shrunk_targets, greedy):
    """Only 24 keys of z-lab's gpt-oss head are quoted (model_type gpt_oss, attention biases, 64 x 64 heads over
    a 2880 width): each reading of what is missing loads, and decodes losslessly on the MoE + sliding target."""
    target_repo = shrunk.HEADS[GPT_OSS_DFLASH]
    target = shrunk_targets[target_repo]
    head = load_dflash(str(shrunk.build(GPT_OSS_DFLASH, tmp_path / "h", edit=GPT_READINGS[reading])), target)
    assert head.config.block_size == 8 and head.config.attention_bias and "bias" in head.layers[0].self_attn.q_proj
    res = speculative_generate(target, head, PROMPT, N, max_draft=K)
    assert res.token_ids == greedy[target_repo] and sum(res.drafted) > 0


SPECULATORS_DSPARK = "RedHatAI/Qwen3.6-35B-A3B-speculator.dspark"


@pytest.mark.parametrize("kind", ["eagle3", "dflash"])
def test_speculators_heads_other_than_dspark_are_refused_with_the_reason(kind, tmp_path):
    cfg = dict(shrunk.published_config(SPECULATORS_DSPARK), speculators_model_type=kind)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    mx.save_safetensors(str(tmp_path / "model.safetensors"), {"fc.weight": mx.zeros((1, 1))})
    for loader in (load_dflash, load_dspark):
        with pytest.raises(SpecError, match=f"speculators-format {kind} head; of that format only DSpark"):
            loader(str(tmp_path))


def test_speculators_dspark_head_reads_taps_and_its_cut_vocabulary(shrunk_dir, shrunk_targets, tmp_path, greedy):
    """Taps are aux ids - 1; the draft vocabulary is d2t's (target id = row + d2t[row]), and a checkpoint whose
    rows are not in ascending token order drafts exactly the same once loaded. As a DFlash head it is refused."""
    target = shrunk_targets[shrunk.HEADS[SPECULATORS_DSPARK]]
    folder = shrunk_dir / SPECULATORS_DSPARK
    head = load_dspark(str(folder), target)
    weights = mx.load(str(folder / "model.safetensors"))
    rows = np.arange(weights["d2t"].shape[0]) + np.asarray(weights["d2t"])
    assert head.config.target_layer_ids == (1, 9, 19, 29, 36) and head.lm_head.weight.shape[0] == len(rows)
    assert np.asarray(head.draft_vocab.ids).tolist() == rows.tolist()
    perm = np.random.default_rng(0).permutation(len(rows))  # the same head, rows shuffled, d2t to match
    shuffled = dict(weights, d2t=mx.array(rows[perm] - np.arange(len(rows)), dtype=mx.int64))
    for name in ("lm_head.weight", "markov_head.markov_w2.weight"):
        shuffled[name] = weights[name][mx.array(perm.astype(np.uint32))]
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    mx.save_safetensors(str(tmp_path / "model.safetensors"), shuffled)
    again = load_dspark(str(tmp_path), target)
    assert mx.array_equal(first_block_logits(target, head), first_block_logits(target, again))
    with pytest.raises(SpecError, match="not a DFlash head"):
        load_dflash(str(folder), target)


@pytest.mark.parametrize("layout", ["z-lab", "speculators"])
def test_a_dflash2_head_is_refused_with_the_reason(layout, tmp_path):
    if layout == "z-lab":
        cfg = dict(shrunk.published_config("z-lab/Qwen3.5-4B-DFlash"), architectures=["DFlash2DraftModel"])
    else:  # speculators' dflash2 config: its defaults name the class; the config around it is the DSpark one's
        cfg = dict(shrunk.published_config(SPECULATORS_DSPARK), speculators_model_type="dflash2", architectures=[])
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    mx.save_safetensors(str(tmp_path / "model.safetensors"), {"fc.weight": mx.zeros((1, 1))})
    with pytest.raises(SpecError, match="DFlash 2 head .* not supported yet"):
        load_dflash(str(tmp_path))


def test_the_original_tools_call_sequence(shrunk_dir, greedy):
    """load_dflash(repo), then the target the preset matches to it, then drafter.bind(target.model)."""
    target_repo, head_repo = DFLASH_PRESETS["qwen3"]
    drafter = load_dflash(str(shrunk_dir / head_repo))
    target = load_target(str(shrunk_dir / target_repo))
    assert drafter.bind(target.model) is drafter
    want = greedy[target_repo]
    assert dflash_generate(target, drafter, PROMPT, N, max_draft=K).token_ids == want
    assert dflash_generate(target, drafter.bind(target), PROMPT, N, max_draft=K).token_ids == want


def run_cli(*args, env=None):
    out = subprocess.run([sys.executable, "-m", "spec", *args, "--json", "--max-new-tokens", str(N), "--prompt", PROMPT],
                         capture_output=True, text=True, timeout=300, env=env)
    return out


@pytest.mark.parametrize("mode, repo", [("dflash", "z-lab/Qwen3-4B-DFlash-b16"),
                                        ("dspark", "deepseek-ai/dspark_qwen3_4b_block7")])
def test_cli_runs_a_published_pair_losslessly(mode, repo, shrunk_dir):
    model = str(shrunk_dir / shrunk.HEADS[repo])
    base = run_cli("--mode", "baseline", "--model", model)
    spec = run_cli("--mode", mode, "--model", model, "--drafter", str(shrunk_dir / repo), "--max-draft", str(K))
    assert base.returncode == 0 and spec.returncode == 0, base.stderr + spec.stderr
    assert json.loads(spec.stdout)["token_ids"] == json.loads(base.stdout)["token_ids"]


@pytest.mark.parametrize("rope", [None, 10_000_000])
def test_speculators_dspark_head_under_each_reading_of_its_rope(rope, tmp_path, shrunk_targets, greedy):
    """The quoted config names no rope: as speculators writes a diff against Qwen3Config, that is its default
    theta 10,000; if the real file carries the verifier's rope_parameters (theta 1e7), that is read instead."""
    target_repo = shrunk.HEADS[SPECULATORS_DSPARK]

    def edit(cfg):
        if rope:
            cfg["transformer_layer_config"]["rope_parameters"] = {"rope_type": "default", "rope_theta": rope}

    head = load_dspark(str(shrunk.build(SPECULATORS_DSPARK, tmp_path / "h", edit=edit)), shrunk_targets[target_repo])
    assert head.config.rope_theta == (rope or 10_000.0) and head.config.head_dim == 16
    res = speculative_generate(shrunk_targets[target_repo], head, PROMPT, N, max_draft=K)
    assert res.token_ids == greedy[target_repo] and sum(res.drafted) > 0
