"""The prompt sets: deterministic, sized as asked, and split so held-out never leaks into training."""

from __future__ import annotations

import hashlib
import json
import platform
import random
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

from spec import prompts as P
from spec.prompts import chat_tasks, code_tasks, math_problems, stdlib, streams

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "assets" / "prompts"


@pytest.fixture(scope="module")
def sets_2000() -> tuple[dict, float]:
    t0 = time.perf_counter()
    sets = P.build_sets(2000, seed=0)
    return sets, time.perf_counter() - t0


@pytest.mark.parametrize("domain", P.DOMAINS)
def test_same_seed_same_prompts_other_seed_other_order(domain):
    a, b = P.generate(domain, 300, seed=7), P.generate(domain, 300, seed=7)
    assert a == b
    assert [r["prompt"] for r in P.generate(domain, 300, seed=8)] != [r["prompt"] for r in a]


@pytest.mark.parametrize("domain", P.DOMAINS)
def test_generate_is_prefix_stable_distinct_and_well_formed(domain):
    small, large = P.generate(domain, 150), P.generate(domain, 600)
    assert large[:150] == small
    assert len({r["prompt"] for r in large}) == len({r["id"] for r in large}) == 600
    for r in large:
        assert set(r) == {"id", "domain", "prompt"} and r["domain"] == domain and r["prompt"].strip()


def test_sizes_and_sides(sets_2000):
    sets, _ = sets_2000
    assert set(sets) == set(P.DOMAINS)
    for domain, sides in sets.items():
        assert len(sides["train"]) == 2000 and len(sides["heldout"]) == P.DEFAULT_HELDOUT
        assert all(P.split_of(r["prompt"]) == "train" for r in sides["train"])
        assert all(P.split_of(r["prompt"]) == "heldout" for r in sides["heldout"])


def test_no_overlap_between_train_and_heldout_even_after_normalising(sets_2000):
    sets, _ = sets_2000
    train = [r["prompt"] for s in sets.values() for r in s["train"]]
    held = [r["prompt"] for s in sets.values() for r in s["heldout"]]
    assert not set(train) & set(held)
    assert not {P.normalise(t) for t in train} & {P.normalise(t) for t in held}


def test_heldout_does_not_depend_on_how_many_train_prompts(sets_2000):
    sets, _ = sets_2000
    small = P.build_sets(300, seed=0)
    for domain in P.DOMAINS:
        assert small[domain]["heldout"] == sets[domain]["heldout"]
        assert small[domain]["train"] == sets[domain]["train"][:300]


def test_generating_2000_per_domain_takes_seconds(sets_2000):
    _, seconds = sets_2000
    print(f"build_sets(2000): {seconds:.2f}s")
    assert seconds < 30  # a few seconds in practice; the bound only catches a pathological slowdown


@pytest.mark.parametrize("name", sorted(math_problems.TEMPLATES))
def test_math_near_duplicates_share_a_key_and_answers_are_clean(name):
    """Same template and numbers with other names, objects and phrasing: one key, so one side."""
    template = math_problems.TEMPLATES[name]
    for trial in range(20):
        casts = [math_problems.draw_cast(random.Random(f"cast{trial}:{i}")) for i in range(3)]
        texts, answers = zip(*(template(random.Random(trial), c) for c in casts))
        assert len(set(answers)) == 1
        ask = random.Random(trial)
        variants = [ask.choice(math_problems.OPENERS) + t + " " + ask.choice(math_problems.ASKS) for t in texts]
        assert len({P.normalise(v) for v in variants}) == 1, variants
        assert len({P.split_of(v) for v in variants}) == 1
        answer = answers[0]
        assert answer >= 0 and 100 % Fraction(answer).denominator == 0, (texts[0], answer)


# sha256 of prompt sets, computed with spec/prompts.py as it was before its word lists and templates moved
# to assets/prompt_data (at commit 05d7b41). They must never change silently: the held-out split is what
# every bench is measured on, and the train prompts are what the heads were distilled from. Editing a
# word in assets/prompt_data fails these; a deliberate change re-pins them in a commit that says why.
PINNED_MATH = "b4bd1191415863bd1e35f40514ef74648330ee138df329ffb3b1aad9477ff288"
PINNED_FIXED_KINDS = "2060c79ed502b6e735d9a4d6d6258de632e63b5cf273f22549c660bfea4f24e9"
# Code and chat sets also hold prompts read from the running Python's docstrings, so they are pinned per
# Python, and they follow what the process imported first: transformers (which mlx_lm, so bench and train,
# import) adds a method to logging.Logger, one more stdlib prompt, which reshuffles the stdlib kinds.
# [as `python -m spec.prompts` writes them, as a process that imported mlx_lm makes them]
PINNED_ALL = {"linux-3.11.7": ["95a5a8fdd55b53b6d58093874ba58130e4f14b42f1870e9a678e090ed0ec62a0",
                               "465d6be20779fabfa1f54a1dad861891a56013ddc45adb62ac3e8078bb185985"]}
# The code and chat kinds that do not read the stdlib: the same on every Python.
FIXED_KINDS = {"code": ("classic", "class", "snippet"),
               "chat": ("concept", "compare", "advice", "howto", "story", "poem", "email", "word", "list", "why",
                        "rewrite", "plan")}


def _sha(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def test_math_sets_are_pinned():
    got = _sha(P.build_sets(500, seed=0, n_heldout=100, domains=["math"]))
    assert got == PINNED_MATH, "the math prompts or their split changed (see PINNED_MATH)"


def test_code_and_chat_prompts_and_their_sides_are_pinned():
    first = {d: zip(streams.stream(d, 0, kinds=kinds), range(1500)) for d, kinds in FIXED_KINDS.items()}
    got = _sha({d: [[it.kind, it.text, P.split_of(it.text)] for it, _ in items] for d, items in first.items()})
    assert got == PINNED_FIXED_KINDS, "the code or chat prompts or their split changed (see PINNED_MATH)"


_PIN_ALL = """
import hashlib, json
from spec import prompts as P
from spec.prompts import chat_tasks, code_tasks, stdlib
sha = lambda x: hashlib.sha256(json.dumps(x, ensure_ascii=False, sort_keys=True).encode()).hexdigest()
out = [sha(P.build_sets(500, seed=0, n_heldout=100))]
import mlx_lm
for f in (stdlib.entries, code_tasks.stdlib_prompts, chat_tasks.pools):
    f.cache_clear()
print(json.dumps(out + [sha(P.build_sets(500, seed=0, n_heldout=100))]))
"""


@pytest.mark.slow  # a child interpreter builds every set afresh
def test_all_sets_are_pinned_on_the_python_they_were_made_with():
    where = f"{sys.platform}-{platform.python_version()}"
    if where not in PINNED_ALL:
        pytest.skip(f"the stdlib-derived prompts are pinned for {', '.join(PINNED_ALL)}, not {where}")
    run = subprocess.run([sys.executable, "-c", _PIN_ALL], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.splitlines()[-1])
    assert got == PINNED_ALL[where], "the prompt sets or their split changed (see PINNED_MATH)"


def test_other_numbers_are_other_problems():
    a = "Tom has 12 apples. He buys 5 more at the store. How many apples does Tom have now? Solve it step by step."
    b = a.replace("12", "13")
    assert P.normalise(a) != P.normalise(b)


def test_phrasings_of_one_task_share_a_key():
    groups = [
        [f.format("reverses a string") for f in code_tasks.CLASSIC_FRAMES],
        [f.format("the water cycle") for f in chat_tasks.FRAMES["concept_frames"]],
        [f.format("Why is the sky blue?") for f in chat_tasks.FRAMES["why_frames"]],
        [f"{ask}\n\n```python\nprint(sum(range(5)))\n```" for ask in code_tasks.SNIPPET_ASKS],
        ["Explain what `textwrap.dedent` does in Python and show a short example.",
         "Without using `textwrap.dedent`, write a Python function that removes common leading whitespace.",
         'The Python documentation describes `textwrap.dedent` like this: "Remove any common leading '
         'whitespace." Explain that in plain English.'],
    ]
    for g in groups:
        assert len({P.normalise(t) for t in g}) == 1, g


def test_split_is_roughly_ten_percent():
    held = sum(P.split_of(r["prompt"]) == "heldout" for r in P.generate("math", 5000))
    assert 350 < held < 650


def test_stdlib_prompts_skip_private_names():
    refs = [e.ref for e in stdlib.entries()]
    assert len(refs) > 500 and "textwrap.dedent" in refs and "str.split" in refs
    assert not any(part.startswith("_") for r in refs for part in r.split("."))


@pytest.mark.parametrize("domain", P.DOMAINS)
def test_asset_prompts_are_heldout_and_made_by_pick_demo(domain):
    rows = P.load_prompts(ASSETS / f"{domain}.jsonl")
    assert 8 <= len(rows) <= 12
    assert all(r["domain"] == domain and P.split_of(r["prompt"]) == "heldout" for r in rows)
    assert rows == P.pick_demo(domain), "re-make with: python -m spec.prompts --demo --out assets/prompts"


def test_jsonl_round_trip_and_cli(tmp_path):
    rows = P.generate("chat", 5)
    assert P.load_prompts(P.write_jsonl(tmp_path / "x" / "c.jsonl", rows)) == rows
    assert P.main(["--out", str(tmp_path / "out"), "--n", "50", "--heldout", "5", "--domains", "math,code"]) == 0
    assert len(P.load_prompts(tmp_path / "out" / "train" / "code.jsonl")) == 50
    assert len(P.load_prompts(tmp_path / "out" / "heldout" / "math.jsonl")) == 5
    (tmp_path / "bad.jsonl").write_text('{"id": "x"}\n')
    with pytest.raises(ValueError):
        P.load_prompts(tmp_path / "bad.jsonl")


def test_asking_for_more_than_a_domain_holds_is_a_clear_error():
    with pytest.raises(ValueError, match="chat"):
        P.build_sets(10**6, domains=["chat"])
