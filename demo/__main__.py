"""`python -m demo`: OpenBLAS for MLX first (a re-exec then skips loading gradio twice), then the app."""

import sys

from spec.cpu import ensure_fast_blas  # light: spec.cpu loads no MLX (that is its point)


def run() -> int:
    """Fast BLAS, then the app: demo.app imports gradio and MLX, so it is imported only after."""
    ensure_fast_blas()
    from demo.app import main  # here, not at the top: MLX must not load before ensure_fast_blas()

    return main()


if __name__ == "__main__":
    sys.exit(run())
