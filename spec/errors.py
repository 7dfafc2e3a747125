"""What users are told: bad input in one clear line (spec.*, the CLI and the app catch it), and a renamed
setting or flag in one deprecation line."""

import argparse
import sys
from typing import Any, Callable


class SpecError(ValueError):
    """Bad input from the user: a clear message, raised before any generation starts."""


_told: set[str] = set()


def deprecated(old: str, new: str) -> None:
    """One line on stderr, once a process, for a name that still works but was renamed (a saved race file,
    an API call or a script from before the rename keeps working)."""
    if old not in _told:
        _told.add(old)
        print(f"note: {old} is deprecated, use {new}", file=sys.stderr)


def flag(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """A parser of a setting as an argparse type: its SpecError becomes argparse's one-line error, which
    then says the setting's own message (not "invalid value")."""
    def as_flag(text: str) -> Any:
        try:
            return parse(text)
        except SpecError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    as_flag.__name__ = parse.__name__
    return as_flag
