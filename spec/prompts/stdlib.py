"""The standard library as a source of prompts: its public objects and the first sentence of their docs.

What this reads is the running Python's own docstrings, so the code and chat prompts built from it are
pinned per Python version (the demo prompts avoid them). The module allow-list and the verbs are in
assets/prompt_data/stdlib.json.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import re
import warnings
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType

from .data import table

# Modules that import cleanly with no side effects, in any environment; private names are skipped.
MODULES: list[str] = table("stdlib.json")["modules"]
_BUILTIN_TYPES = (str, list, dict, set, frozenset, bytes, int, float, tuple)
_MODULE_ALIASES = {"os.path": ("posixpath", "ntpath", "genericpath")}

# Imperative verbs that open stdlib docstrings ("Return the cosine of x.") and read well as a task.
_VERBS = set(table("stdlib.json")["verbs"])


@dataclass(frozen=True)
class StdlibEntry:
    ref: str  # e.g. "textwrap.dedent" or "str.split"
    sentence: str  # first sentence of its docstring, cleaned
    is_class: bool
    is_python: bool  # written in Python (so "implement a simplified version" is sensible)


def clean_doc_sentence(doc: str | None) -> str | None:
    """First sentence of a docstring's first prose paragraph, or None when it reads badly."""
    if not doc:
        return None
    for para in inspect.cleandoc(doc).split("\n\n"):
        p = " ".join(para.split())
        if not p or "-->" in p or "::=" in p or p.startswith(("|", ">>>", "=")) or re.match(r"^[\w.]+\(.*\)", p):
            continue
        break
    else:
        return None
    p = p.replace("e.g.", "for example").replace("i.e.", "that is").replace("etc.", "and so on")
    p = re.sub(r":\w+:`~?([^`]+)`", r"\1", p)  # :func:`x` -> x
    p = re.sub(r"\*{1,2}(\w+)\*{1,2}", r"\1", p.replace("``", "").replace("`", ""))  # *x*, **x** -> x
    s = re.split(r"(?<=[.!?])\s+(?=[A-Z(])", p)[0].strip()
    if not s.endswith("."):
        s += "."
    words = s.split()
    bad = r"\b(deprecated|internal|undocumented|private|python 2|xxx|todo|jython|self)\b"
    if not 4 <= len(words) <= 32 or not s.isascii() or re.search(bad, s.lower()):
        return None
    if s.count("(") != s.count(")") or s.count('"') % 2 or s.endswith((":.", ",.", ";.")):
        return None
    return s


def third_person(sentence: str) -> str | None:
    """'Return the cosine of x.' -> 'returns the cosine of x'; None if it doesn't open with a verb."""
    words = sentence.rstrip(".").split()
    lead: list[str] = []
    if words[0].lower().endswith("ly") and len(words) > 1:  # "Recursively delete ..."
        lead, words = [words[0].lower()], words[1:]
    verb = words[0].lower()
    if verb in _VERBS:
        if verb in ("do", "go") or verb.endswith(("s", "sh", "ch", "x", "z")):
            verb += "es"
        elif verb.endswith("y") and verb[-2] not in "aeiou":
            verb = verb[:-1] + "ies"
        else:
            verb += "s"
    elif not (verb.endswith("s") and verb[:-1] in _VERBS or verb.endswith("es") and verb[:-2] in _VERBS):
        return None
    return " ".join(lead + [verb] + words[1:])


def _own_module(obj: object, modname: str) -> bool:
    om = getattr(obj, "__module__", None) or ""
    return om == modname or om.lstrip("_") == modname or om in _MODULE_ALIASES.get(modname, ())


def _entry(ref: str, obj: object, is_python: bool) -> StdlibEntry | None:
    sentence = clean_doc_sentence(getattr(obj, "__doc__", None))
    if sentence is None:
        return None
    return StdlibEntry(ref, sentence, inspect.isclass(obj), is_python)


@lru_cache(maxsize=1)
def entries() -> tuple[StdlibEntry, ...]:
    """Public functions, classes and methods of the allow-listed stdlib modules and builtin types."""
    out: list[StdlibEntry] = []
    for t in _BUILTIN_TYPES:
        for name, obj in sorted(vars(t).items()):
            if not name.startswith("_") and callable(obj) and (e := _entry(f"{t.__name__}.{name}", obj, False)):
                out.append(e)
    for name, obj in sorted(vars(builtins).items()):
        if not name.startswith("_") and inspect.isbuiltin(obj) and name not in ("breakpoint", "exec", "eval", "input"):
            if e := _entry(name, obj, False):
                out.append(e)
    for modname in MODULES:
        if (mod := import_quietly(modname)) is None:
            continue
        for name, obj in sorted(vars(mod).items()):
            if name.startswith("_") or not _own_module(obj, modname):
                continue
            if inspect.isclass(obj):
                if issubclass(obj, BaseException):
                    continue
                if e := _entry(f"{modname}.{name}", obj, False):
                    out.append(e)
                # Methods are not checked for their module: one another library adds counts too (transformers
                # adds logging.Logger.warning_advice), so these depend on what the process imported first.
                for mname, meth in sorted(vars(obj).items()):
                    if not mname.startswith("_") and inspect.isfunction(meth):
                        if e := _entry(f"{modname}.{name}.{mname}", meth, True):
                            out.append(e)
            elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
                if e := _entry(f"{modname}.{name}", obj, inspect.isfunction(obj)):
                    out.append(e)
    seen: set[str] = set()
    return tuple(e for e in out if not (e.ref in seen or seen.add(e.ref)))



def import_quietly(modname: str) -> ModuleType | None:
    """The module, or None where it is absent on this platform: the rest still works."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(modname)
    except Exception:
        return None
