"""`python -m demo`: OpenBLAS for MLX first (a re-exec then skips loading gradio twice), then the app."""

import sys


def run() -> int:
    from spec.cpu import ensure_fast_blas

    ensure_fast_blas()
    from demo.app import main

    return main()


if __name__ == "__main__":
    sys.exit(run())
