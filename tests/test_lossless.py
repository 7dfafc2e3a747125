"""Greedy speculative output must equal plain greedy decoding, token for token."""

import time

import pytest
import tiny
from hypothesis import given, settings
from hypothesis import strategies as st

from spec.heads.registry import load_dflash, load_dspark
from spec.loop.engine import Engine

prompts = st.lists(st.integers(min_value=4, max_value=259), min_size=1, max_size=40)


@pytest.fixture(scope="module", params=["qwen3", "llama", "qwen2", "qwen3-8bit"])
def pair(request, tiny_dir):
    """Each family mlx-lm ships, and a quantized target (as mlx-community hub targets arrive)."""
    import json

    import tiny

    from spec.target import load_target

    name = request.param
    folder = tiny_dir / name
    if not folder.exists():
        family, _, bits = name.partition("-")
        tiny.make_target(folder, family=family, bits=int(bits[:-3]) if bits else 0)
    cfg = json.loads((folder / "config.json").read_text())
    if not (tiny_dir / f"dflash-{name}").exists():
        tiny.make_dflash_head(tiny_dir / f"dflash-{name}", cfg)
        tiny.make_dspark_head(tiny_dir / f"dspark-{name}", cfg)
    t = load_target(str(folder))
    return t, load_dflash(str(tiny_dir / f"dflash-{name}"), t), load_dspark(str(tiny_dir / f"dspark-{name}"), t)


@settings(max_examples=12, deadline=None)
@given(prompt=prompts, cap=st.integers(1, 7), n=st.integers(1, 24))
def test_random_heads_are_lossless(pair, prompt, cap, n):
    t, dflash, dspark = pair
    want = Engine(t).generate(prompt, n).token_ids
    for drafter, threshold in ((dflash, 0.0), (dspark, 0.0), (dspark, 0.6)):
        res = Engine(t, drafter, max_draft=min(cap, drafter.max_drafts), confidence_threshold=threshold).generate(prompt, n)
        assert res.token_ids == want, (drafter.kind, cap)
        assert len(res.token_ids) == n or res.finish_reason == "eos"
        assert all(1 <= a <= d + 1 for a, d in zip(res.accept_lengths, res.drafted))


@pytest.mark.parametrize("cap", [2, 0])
def test_draft_vocabulary_is_lossless_and_drafts_stay_inside_it(pair, cap):
    """A head drafting over a subset of the vocabulary (spec.vocab) changes speed, never output."""
    t, dflash, dspark = pair
    prompt = [9, 8, 7, 6, 5]
    want = Engine(t).generate(prompt, 20).token_ids
    subset = list(range(4, t.vocab_size, 3))
    for head in (dflash, dspark):
        head.use_draft_vocab(subset)
        try:
            drafts = []
            eng = Engine(t, head, max_draft=cap)
            original = head.propose
            head.propose = lambda *a, **k: drafts.append(original(*a, **k)) or drafts[-1]
            res = eng.generate(prompt, 20)
        finally:
            head.use_draft_vocab(None)
            del head.propose
        assert res.token_ids == want
        assert drafts and all(set(d.tolist()) <= set(subset) for d, _ in drafts)


@pytest.mark.parametrize("corrupt", [0.0, 0.15, 0.5])
def test_oracle_partial_acceptance_is_lossless(pair, corrupt):
    t, dflash, dspark = pair
    prompt = [10, 20, 30, 40, 50]
    want = Engine(t).generate(prompt, 40).token_ids
    for head in (dflash, dspark):
        seen = set()
        for seed in range(3):
            eng = Engine(t, tiny.OracleHead(head, want, len(prompt), corrupt, seed))
            res = eng.generate(prompt, 40)
            assert res.token_ids == want
            seen.update(res.accept_lengths)
        if corrupt == 0.0:
            assert max(seen) == head.max_drafts + 1  # whole drafts accepted
        if corrupt == 0.5:
            assert 1 in seen and len(seen) >= 3  # rejections at several depths


def test_stop_and_limits(qwen3, tiny_dir):
    dflash = load_dflash(str(tiny_dir / "dflash-qwen3"), qwen3)
    gen = Engine(qwen3, dflash).start([10, 11, 12], 50)
    first = gen.step()
    assert first.index == 0 and len(first.tokens) == 1
    gen.stop()
    assert gen.step() is None and gen.result.finish_reason == "stopped"
    # the context limit ends a generation cleanly (max_position_embeddings is 512)
    res = Engine(qwen3, dflash).generate(list(range(4, 200)) * 2 + [7] * 100, 200)
    assert res.finish_reason in ("context", "eos") and len(res.token_ids) + 492 <= 512


def test_profiling_times_the_drafter_and_changes_nothing(pair):
    t, dflash, dspark = pair
    want = Engine(t).generate([11, 12, 13], 16).token_ids
    for head in (dflash, dspark):
        res = Engine(t, head, profile=True).generate([11, 12, 13], 16)
        assert res.token_ids == want and 0 < res.draft_seconds < res.decode_seconds


def test_decode_time_holds_every_plain_step_and_the_prefill_none(qwen3, monkeypatch):
    """Pipelined plain decoding dispatches its first step in the prefill round (on the CPU backend the
    dispatch waits for most of the compute): that step is decoding, so its time counts there, not in
    the prefill (as mlx-lm counts from the first token), or plain decoding reads faster than it is."""
    from spec.loop.generation import Generation

    plain, step_s = Generation._plain_forward, 0.05

    def slow(self, token):  # every plain step dispatched takes at least step_s
        time.sleep(step_s)
        return plain(self, token)

    monkeypatch.setattr(Generation, "_plain_forward", slow)
    gen = Engine(qwen3).start([11, 12, 13], 6)
    rounds = list(gen)
    res = gen.result
    assert len(res.token_ids) == 6 and res.prefill_seconds < step_s
    assert res.decode_seconds >= 5 * step_s  # the steps of tokens 2..6
    assert sum(r.seconds for r in rounds) == pytest.approx(res.prefill_seconds + res.decode_seconds)
