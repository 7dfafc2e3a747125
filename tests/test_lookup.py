"""Prompt lookup, the head-free drafter: what it copies, and that the one verify loop keeps it lossless
(T = 0 identical to greedy, T > 0 an exact sample) on a tiny random target and on the pocket preset."""

import numpy as np
import pytest
from scipy.stats import chisquare
from test_sampling import expected_counts, later_tokens_law, vocab8_pair

from spec.errors import SpecError
from spec.heads.lookup import LookupConfig, PromptLookup
from spec.loop.calibrate import build_engine
from spec.loop.engine import Engine
from spec.loop.verify import Sampling
from spec.target import load_target


def cache_of(tokens, **config):
    head = PromptLookup(LookupConfig(**config))
    cache = head.make_cache()
    head.see(cache, tokens)
    return cache


def test_the_longest_newest_match_is_copied_and_the_suffix_never_finds_itself():
    #            0  1  2  3  4  5  6  7  8  9 10 11
    text = [5, 6, 7, 8, 1, 6, 7, 9, 2, 5, 6, 7]
    # "6 7" last occurred at 5-6 (followed by 9 2 5 ...), but "5 6 7" occurred at 0-2 (followed by 8): longest wins
    assert cache_of(text).continuation(3) == [8, 1, 6]
    assert cache_of(text, max_ngram=2).continuation(3) == [9, 2, 5]  # the most recent "6 7"
    assert cache_of([1, 2, 3, 4]).continuation(5) == []  # nothing repeats: no draft
    assert cache_of([3, 3]).continuation(4) == [3]  # a run copies itself as far as the text goes
    grown = cache_of([4, 9, 4])
    grown.extend([9])  # committed tokens are searched too
    assert grown.continuation(2) == [4, 9]
    with pytest.raises(SpecError, match="min <= max"):
        LookupConfig(min_ngram=3, max_ngram=2)


@pytest.fixture(scope="module")
def target(tiny_dir):
    return load_target(str(tiny_dir / "qwen3"))


def loop_prompt(t):
    """A prompt that quotes itself, so lookups find something from the first round on."""
    return t.encode_chat("alpha beta gamma delta alpha beta gamma delta alpha beta")


@pytest.mark.parametrize("max_draft", [1, 4, 15, "auto"])
def test_lookup_at_t0_is_identical_to_greedy(target, max_draft):
    prompt = loop_prompt(target)
    want = Engine(target).generate(prompt, 40)
    res = build_engine(target, PromptLookup().bind(target), max_draft).generate(prompt, 40)
    assert res.token_ids == want.token_ids
    assert len(res.accept_lengths) <= len(want.accept_lengths)


def test_lookup_drafts_where_the_text_repeats_and_nothing_elsewhere(target):
    """On a random target's rambling text the lookup finds matches now and then: those rounds land
    copies; where the newest tokens never occurred before it drafts nothing (a plain round)."""
    prompt = loop_prompt(target)
    res = Engine(target, PromptLookup().bind(target), max_draft=15).generate(prompt, 120)
    assert res.token_ids == Engine(target).generate(prompt, 120).token_ids
    assert res.drafted[0] == 15  # the prompt's own ending occurred in it before: a full block
    assert 0 in res.drafted and sum(a > 2 for a in res.accept_lengths) >= 3


@pytest.mark.slow  # an exact-sample (chi-square) test: 1500 generations
def test_lookup_at_t_gt_0_samples_the_targets_law(tiny_dir):
    t, _ = vocab8_pair(tiny_dir)
    prompt = [1, 4, 6, 2, 1, 4]  # "1 4" occurred before: the lookup drafts 6 2 1 4 ...
    exp = later_tokens_law(t, prompt, Sampling(1.0, seed=0))
    head, n = PromptLookup(LookupConfig(block_size=3)).bind(t), 1500
    counts, drafted = np.zeros((8, 8)), 0
    for seed in range(n):
        res = Engine(t, head, max_draft=2, sampling=Sampling(1.0, seed=seed)).generate(prompt, 3)
        counts[res.token_ids[1], res.token_ids[2]] += 1
        drafted += sum(res.drafted)
    assert drafted > n / 4  # the lookup did draft (and its drafts were tested against the target)
    assert chisquare(counts.ravel(), expected_counts(exp.ravel(), n)).pvalue > 1e-3


def test_an_unbound_or_unshown_lookup_says_what_is_missing(target):
    head = PromptLookup()
    cache = head.make_cache()
    head.see(cache, [1, 2, 1])
    with pytest.raises(SpecError, match="not bound"):
        head.propose(cache, None, 1, 2, Sampling(1.0), None)
    with pytest.raises(SpecError, match="not shown the committed tokens"):
        head.bind(target).propose(cache, None, 7, 2, Sampling(), None)


@pytest.mark.pocket
def test_on_the_pocket_preset_a_prompt_that_quotes_itself_lands_more_than_two_a_round():
    from spec.presets import resolve

    t = load_target(resolve("pocket", "target"))
    text = ("def area(width, height):\n    return width * height\n\n"
            "def perimeter(width, height):\n    return 2 * (width + height)\n")
    prompt = f"Copy this code exactly, adding nothing:\n\n```python\n{text}```"
    want = Engine(t).generate(prompt, 48)
    res = Engine(t, PromptLookup().bind(t), max_draft=15).generate(prompt, 48)
    assert res.token_ids == want.token_ids
    assert np.mean(res.accept_lengths) > 2, (res.accept_lengths, res.text)
    sampled = Engine(t, PromptLookup().bind(t), max_draft=15, sampling=Sampling(0.7, seed=3)).generate(prompt, 48)
    assert sampled.text.strip() and sum(a > 1 for a in sampled.accept_lengths) > 0


def test_the_calibration_times_rounds_of_the_length_it_asks_for(target):
    """auto's costs of k drafts must be timed on k drafts: the calibration shows the lookup its context."""
    from spec.loop.calibrate import WarmPair

    pair = WarmPair(target, PromptLookup().bind(target))
    assert [pair.draft(k).shape[0] for k in (1, 7, 15)] == [1, 7, 15]
