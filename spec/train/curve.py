"""How good a head is: its mean accept length per domain on held-out prompts, during training (the log's
curve, drawn against steps) and side by side for finished heads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from ..errors import SpecError
from ..loop.calibrate import build_engine
from ..report import to_markdown
from ..target import Target


def evaluate(target: Target, head: Any, prompts: list[dict], max_new_tokens: int = 96,
             max_draft: int = 0) -> dict[str, float]:
    """Mean accept length per domain at T = 0 on the given (held-out) prompts (chains, max_draft 0: the
    head's whole block)."""
    out: dict[str, list[int]] = {}
    eng = build_engine(target, head, max_draft)
    for p in prompts:
        res = eng.generate(p["prompt"], max_new_tokens)
        out.setdefault(p["domain"], []).extend(res.accept_lengths)
    return {d: round(sum(v) / len(v), 3) for d, v in out.items()}


def accept_curve(runs: Sequence[Path]) -> "Any":
    """Held-out accept length vs training step (and minutes trained) of run folders, from their logs."""
    import pandas as pd

    rows = []
    for run in runs:
        state = json.loads((Path(run) / "checkpoint" / "state.json").read_text())
        kind, log = state["settings"]["kind"], state["log"]
        clock = {e["step"]: e["time"] for e in log if "time" in e}
        start = min(clock.values()) if clock else 0.0
        for e in log:
            if "heldout_accept" in e:
                t = clock.get(e["step"], max((v for k, v in clock.items() if k <= e["step"]), default=start))
                rows += [{"kind": kind, "step": e["step"], "minutes": round((t - start) / 60, 1), "domain": d,
                          "accept": a} for d, a in e["heldout_accept"].items()]
    if not rows:
        raise SpecError("no held-out evaluations in these runs' logs (train with --eval-every N)")
    return pd.DataFrame(rows)


def write_curve(curve: "Any", out: Path) -> list[Path]:
    """curve.md (step x kind/domain table) and curve.png (accept length vs step) in `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


    out.mkdir(parents=True, exist_ok=True)
    wide = curve.assign(col=curve["kind"].map({"dflash": "DFlash", "dspark": "DSpark"}) + " " + curve["domain"])
    wide = wide.pivot_table(index="step", columns="col", values="accept").round(2)
    wide.columns.name = None
    paths = [out / "curve.md", out / "curve.png"]
    paths[0].write_text(to_markdown(wide.reset_index().fillna("")) + "\n")
    ax = wide.plot(figsize=(8, 4.5), marker="o", style=["-" if c.startswith("DFlash") else "--" for c in wide])
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out accept length (T = 0)")
    plt.tight_layout()
    plt.savefig(paths[1], dpi=120)
    plt.close()
    return paths


def compare(target: Target, heads: list[tuple[str, Any]], prompts: list[dict], max_new_tokens: int = 64) -> "Any":
    """Mean held-out accept length per domain of each head (chains of its full block), on the same prompts."""
    import pandas as pd

    rows = [{"head": name, **evaluate(target, head, prompts, max_new_tokens)} for name, head in heads]
    table = pd.DataFrame(rows).round(2)
    return table.assign(mean=table.drop(columns="head").mean(axis=1).round(2))
