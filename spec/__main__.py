"""`python -m spec`: the fast CPU BLAS first (before anything loads MLX: then no restart), then the CLI."""

import sys

from .cpu import ensure_fast_blas

ensure_fast_blas()
from .cli import main  # noqa: E402  (cli loads MLX)

sys.exit(main())
