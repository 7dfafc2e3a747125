"""Progress of the slow steps before a first race (converting the pocket target, calibrating each head):
one callback, `progress(step, fraction)`, that the console shows as tqdm bars and the app as a line on
the page, so a cold start says what it is doing instead of sitting silent for a minute."""

from __future__ import annotations

import sys
import time
from typing import Callable

Progress = Callable[[str, float], None]  # (what is being prepared, in words; fraction of it done, 0..1)


def quiet(step: str, fraction: float) -> None:
    """The default: report nothing."""


class Console:
    """tqdm bars on stderr, one per step (a new step closes the last), each forwarded to `also`.

    Every step is also kept with the seconds it took (`durations`), for the log and the docs."""

    def __init__(self, also: Progress = quiet, file=None):
        self.also, self.file = also, file or sys.stderr
        self.bar, self.step, self.started = None, "", 0.0
        self.durations: dict[str, float] = {}

    def __call__(self, step: str, fraction: float) -> None:
        from tqdm import tqdm

        if step == self.step and self.bar is None:  # the step has finished already
            self.also(step, fraction)
            return
        if step != self.step:
            self.close()
            self.step, self.started = step, time.perf_counter()
            self.bar = tqdm(total=100, desc=step, file=self.file, leave=True, dynamic_ncols=True,
                            bar_format="{desc}: {percentage:3.0f}%|{bar:24}| {elapsed}")
        self.bar.n = round(100 * min(max(fraction, 0.0), 1.0))
        self.bar.refresh()
        self.also(step, fraction)
        if fraction >= 1:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.durations[self.step] = time.perf_counter() - self.started
            self.bar = None
