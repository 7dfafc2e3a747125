"""Who wins where, in ten seconds: per domain, each head as the race runs it by default (`auto`) against
greedy, in one plain line per domain: from the last domain sweep finished on this machine with the
same models (`remember_sweep`), else from the shipped head-to-head table (`python -m spec bench`). Two
results within the measured noise (twice the trial-to-trial spread of that domain, as the race's tie
floor is) are called a tie; the line says why where the table can: which head lands more drafts per
round, and whether that paid. The page shows it before any race, labelled with the machine and date.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..atomic import write_json
from ..pocket import cache_root
from .settings import upgraded

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "assets" / "bench" / "lookup-quiet"  # the README's table: the shipped measurement
LOOKUP = "Prompt lookup"
# the racers: their bench rows, best first (the heads as a race runs them by default: with the lookup branch),
# then their sweep rows
HEADS = {"DSpark": ("DSpark auto + lookup", "DSpark auto", "DSpark"),
         "DFlash": ("DFlash auto + lookup", "DFlash auto", "DFlash"), LOOKUP: ("lookup auto", "lookup")}
GREEDY = ("greedy (ours)", "greedy")


@dataclass
class Story:
    source: str  # where the numbers come from, in words: machine, date, folder
    label: str = "auto"  # how the heads ran: "auto" (the shipped table's rows) or the sweep's draft lengths
    rows: list[dict] = field(default_factory=list)  # per domain: {domain, DSpark, DFlash} "accept / ×speedup"
    lines: list[str] = field(default_factory=list)  # per domain: who wins and why, in words
    per_domain: int = 0  # prompts measured in the domain with fewest (0: not known)
    branched: bool = False  # the heads' rows are theirs with the lookup branch (bench rows "... auto + lookup")


def story_of(table: Any, spreads: dict[str, float], source: str, label: str = "auto") -> Story:
    """The story of a method x domain table (columns method, domain, accept, speedup); spreads: per
    domain the trial-to-trial spread of a run's speed (a fraction)."""
    out = Story(source, label)
    for domain in dict.fromkeys(table["domain"]):
        rows = table[table["domain"] == domain].set_index("method")
        got = {h: rows.loc[next(n for n in names if n in rows.index)] for h, names in HEADS.items()
               if any(n in rows.index for n in names)}
        if not got:
            continue
        out.branched |= any(str(r.name).endswith("+ lookup") for r in got.values())
        band = 2 * spreads.get(domain, 0.025)
        out.rows.append({"domain": domain, **{h: f"{r['accept']:.2f} / ×{r['speedup']:.2f}" for h, r in got.items()}})
        out.lines.append(line(domain, {h: (float(r["speedup"]), float(r["accept"])) for h, r in got.items()}, band))
    return out


def line(domain: str, racers: dict[str, tuple[float, float]], band: float) -> str:
    """One domain in words: racers (the heads, and prompt lookup where it raced) -> (speedup, accept)."""
    shown = ", ".join(f"{h} ×{x:.2f}" for h, (x, _) in racers.items())
    order = sorted(racers, key=lambda h: -racers[h][0])
    best, two = order[0], set(racers) <= set(HEADS) - {LOOKUP}
    if racers[best][0] < 1 - band:
        who = f"{best} is" if len(racers) == 1 else "both heads are" if two and len(racers) == 2 else "every racer is"
        return f"{domain}: {who} slower than greedy ({shown}): too few drafts land to pay for verifying them."
    if racers[best][0] < 1 + band:
        who = "neither head beats" if two and len(racers) == 2 else f"{best} does not beat" if len(racers) == 1 \
            else "no racer beats"
        return f"{domain}: {who} greedy beyond the noise ({shown}): too few drafts land to pay for verifying them."
    if len(racers) == 1:
        return f"{domain}: {best} ×{racers[best][0]:.2f} over greedy (accept {racers[best][1]:.2f})."
    other = order[1]
    (x, acc), (y, acc_o) = racers[best], racers[other]
    landed = (f"{best} lands more per round (accept {acc:.2f} vs {acc_o:.2f})" if acc >= acc_o else
              f"{best} lands less per round (accept {acc:.2f} vs {acc_o:.2f}) but its rounds cost less")
    if (x - y) / x <= band:
        pair = "the heads" if {best, other} <= set(HEADS) - {LOOKUP} else f"{best} and {other}"
        return f"{domain}: a tie between {pair} ({shown}, within the {100 * band:.0f}% noise); {landed}."
    return f"{domain}: {best} wins ({shown}): {landed}."


@lru_cache(maxsize=None)  # the shipped files do not change while the server runs
def shipped_spreads(folder: Path = SHIPPED) -> dict[str, float]:
    """Per domain, the median trial-to-trial spread of a bench folder's runs ({} when unknown)."""
    import pandas as pd

    try:
        runs = pd.read_csv(folder / "runs.csv")
    except (OSError, ValueError):
        return {}
    return runs.groupby("domain")["spread"].median().to_dict() if "spread" in runs else {}


@lru_cache(maxsize=None)
def shipped_story(folder: Path = SHIPPED) -> Story | None:
    """The story of a bench folder (table.json, runs.csv, table.md's header): None when it is missing."""
    import pandas as pd

    try:
        table = pd.DataFrame(json.loads((folder / "table.json").read_text()))
        header = (folder / "table.md").read_text().splitlines()
    except (OSError, ValueError):
        return None
    spreads = shipped_spreads(folder)
    each = shipped_per_domain(folder)
    machine = header[1].split(";")[0] if len(header) > 1 else "an unrecorded machine"
    machine = re.sub(r", load average [0-9.]+ at start", "", machine)
    date = header[1].rsplit(";", 1)[-1].strip() if len(header) > 1 else ""
    preset = header[0].lstrip("# ").split(":")[0] if header else "?"
    where = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder
    out = story_of(table, spreads, f"measured on {machine}, {date} ({preset} preset, held-out prompts; {where})")
    out.per_domain = each
    return out


@lru_cache(maxsize=None)
def shipped_per_domain(folder: Path = SHIPPED) -> int:
    """Prompts per domain in a bench folder's runs (the domain with fewest; 0 when unknown)."""
    import pandas as pd

    try:
        runs = pd.read_csv(folder / "runs.csv")
        return int(runs.groupby("domain")["prompt"].nunique().min())
    except (OSError, ValueError, KeyError):
        return 0


def sweep_file(models: dict[str, str]) -> Path:
    """Where the last finished sweep of these models is kept: sweeps/ in the model cache, one file per
    target and heads (a sweep of other models tells nothing about these)."""
    key = hashlib.sha256(json.dumps(models, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root() / "sweeps" / f"last-{key}.json"


def remember_sweep(doc: dict) -> None:
    """Keep a finished sweep (the app's JSON download: table, settings, models, timestamp) as the story
    of its models on this machine. A stopped sweep, or one that raced no head, is not kept."""
    if doc.get("stopped") or not any(r.get("method") in {names[-1] for names in HEADS.values()} for r in doc.get("table", [])):
        return
    write_json(sweep_file(doc.get("models", {})), {**doc, "rows": []})


def sweep_story(models: dict[str, str]) -> Story | None:
    """The story of the last sweep finished here with these models (None: none yet, or unreadable). A
    sweep races each prompt once, so its noise band is the shipped run's spread of trials."""
    import pandas as pd

    try:
        doc = json.loads(sweep_file(models).read_text())
        table = pd.DataFrame(doc["table"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    s = upgraded(doc.get("settings") or {})
    lengths = {s.get("dspark_max_draft"), s.get("dflash_max_draft")}
    label = "auto" if lengths == {"auto"} else "as raced"
    prompts = doc.get("prompts", [])
    n, each = len(prompts), min(Counter(q.get("domain") for q in prompts).values(), default=0)
    when = str(doc.get("timestamp", ""))[:16].replace("T", " ")
    small = ""
    if each < 2 or each < shipped_per_domain():
        races = "one race" if each == 1 else f"{each} races"
        small = f"; a small sample: {races} per domain"
        if each < shipped_per_domain():  # story_for shows it only to the session that ran it
            small += (f", shown to you only: other visitors and a reload see the shipped table "
                      f"({shipped_per_domain()} prompts per domain)")
    source = (f"your last domain sweep on this machine, {when} UTC ({n} prompts, {s.get('max_new_tokens', '?')} "
              f"new tokens each, T = {s.get('temperature', '?')}; draft lengths {s.get('dspark_max_draft', '?')} / "
              f"{s.get('dflash_max_draft', '?')}{small})")
    out = story_of(table, shipped_spreads(), source, label)
    out.per_domain = each
    out.branched = bool(s.get("lookup_branch", False))  # older sweep files: raced before the branch existed
    return out


def story_for(models: dict[str, str], mine: bool = False) -> Story | None:
    """What the page shows before a race: the last sweep of these models here, else the shipped table.
    A sweep of fewer prompts per domain than the shipped table does not replace that better measurement
    for every visitor: only the session that ran it (`mine`) sees it, and it says so."""
    swept, shipped = sweep_story(models), shipped_story()
    if swept is not None and (mine or shipped is None or swept.per_domain >= shipped.per_domain):
        return swept
    return shipped
