"""Code prompts: classic small tasks and classes (hand-written, Python-version independent), short
code-reading snippets with varied values, and tasks about stdlib objects read by inspect.

The tasks are assets/prompt_data/code_classic_tasks.txt (functions) and code_class_tasks.txt, one a
line; their frames, the snippet questions and the snippet words are in code.json.
"""

from __future__ import annotations

import random
from functools import lru_cache

from .data import lines, table
from .stdlib import entries, third_person

CLASSIC_TASKS = lines("code_classic_tasks.txt")
CLASS_TASKS = lines("code_class_tasks.txt")
CLASSIC_FRAMES: list[str] = table("code.json")["classic_frames"]
CLASS_FRAMES: list[str] = table("code.json")["class_frames"]
SNIPPET_ASKS: list[str] = table("code.json")["snippet_asks"]
_WORDS: list[str] = table("code.json")["snippet_words"]


def snippet(r: random.Random) -> str:
    """A code-reading question: a template whose holes `r` fills."""
    w, w2, w3 = r.sample(_WORDS, 3)
    a, b, n, k = r.randint(10, 99), r.randint(2, 9), r.randint(3, 8), r.randint(2, 5)
    nums = r.sample(range(1, 30), 5)
    code = r.choice([
        f'print("{w}"[::-1])',
        f'print("-".join(["{w}", "{w2}", "{w3}"]))',
        f"print([x * {k} for x in range({n})])",
        f"print(sum(range({n})))",
        f"print({a} // {b}, {a} % {b})",
        f"print(sorted({nums}, reverse=True))",
        f'print(len("{w}") + len("{w2}"))',
        f'print("{w}".upper().count("{w[0].upper()}"))',
        f'print(list(zip([1, 2, 3], "{w[:3]}")))',
        f'd = {{"{w}": {a}, "{w2}": {b}}}\nprint(d.get("{w3}", 0) + d["{w}"])',
        f"nums = {nums}\nprint(max(nums) - min(nums))",
        f'print([c for c in "{w}" if c in "aeiou"])',
        f"print(list(filter(lambda x: x % {k} == 0, {nums})))",
        f'print({{c: "{w}".count(c) for c in "{w}"}})',
        f"nums = {nums}\nprint(nums[1:{k + 1}], nums[-1])",
        f'print("{w} {w2} {w3}".split()[{r.randint(0, 2)}].title())',
        f"print(list(enumerate(['{w}', '{w2}'], start={k})))",
        f"x = {a}\nwhile x > {b * 5}:\n    x -= {b}\nprint(x)",
        f"total = 0\nfor i in range(1, {n + 1}):\n    total += i * i\nprint(total)",
        f'print(f"{{{a} / {b}:.2f}}")',
        f"print(any(x > {a % 30} for x in {nums}), all(x > 0 for x in {nums}))",
        f"s = set({nums[:3]}) | set({nums[2:]})\nprint(len(s))",
    ])
    return f"{r.choice(SNIPPET_ASKS)}\n\n```python\n{code}\n```"


@lru_cache(maxsize=1)
def stdlib_prompts() -> dict[str, list[str]]:
    """Four kinds of task about each stdlib function or class, keyed by kind."""
    explain, write, implement, use = [], [], [], []
    for e in entries():
        ref = f"`{e.ref}`"
        if e.is_class:
            explain.append(f"Explain what the {ref} class is for and write a short example that uses it.")
            continue
        explain.append(f"Explain what {ref} does in Python and show a short example.")
        use.append(f"Show how to use {ref} in a small, practical Python example.")
        vp = third_person(e.sentence)
        if vp:
            write.append(f"Without using {ref}, write a Python function that {vp}.")
            if e.is_python or e.ref.split(".")[0] in ("str", "list", "dict", "set"):
                implement.append(f"Implement a simplified version of {ref} in pure Python and explain how it works.")
    return {"stdlib_explain": explain, "stdlib_write": write, "stdlib_implement": implement, "stdlib_use": use}

