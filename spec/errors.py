"""The one error type users see: bad input, said in one clear line (spec.*, the CLI and the app catch it)."""


class SpecError(ValueError):
    """Bad input from the user: a clear message, raised before any generation starts."""
