"""`python -m spec bench BENCHMARK [flags]`: every benchmark, one sub-command each (docs/benchmarks.md).

With no sub-command, the head to head. The old spellings (`--curve`, `--tree-estimate CSV`, ...) still run
theirs, with a note on stderr naming the new form (spec.bench.flags reads them).
"""

from __future__ import annotations

import argparse
import sys

from . import flags

PROG = "python -m spec bench"


def parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The bench parser, and each sub-command's own (for errors that name it). The benchmarks are listed
    by hand, one line each: argparse's own list wraps long names onto two."""
    width = max(map(len, flags.COMMANDS)) + 2
    listed = "\n".join(f"  {name:<{width}}{line}" for name, (line, _) in flags.COMMANDS.items())
    p = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=f"{__doc__.splitlines()[0]}\n\nbenchmarks:\n{listed}",
        epilog=f"No benchmark named: {flags.DEFAULT}. The old spellings (--curve, --tree-estimate CSV, --noise, ...) "
               f"still work and say their new form.\nEach benchmark's flags: {PROG} BENCHMARK --help")
    sub = p.add_subparsers(dest="_command", metavar="BENCHMARK", help="one of the benchmarks above")
    subs = {}
    for name, (line, add_flags) in flags.COMMANDS.items():
        subs[name] = sub.add_parser(name, description=line, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        add_flags(subs[name])
    return p, subs


def main(argv: list[str]) -> int:
    """`python -m spec bench ...`; returns the exit status."""
    p, subs = parser()
    args = p.parse_args(flags.modern(list(argv)))
    if args._command == "tree-estimate" and args.runs_csv is None:
        subs["tree-estimate"].error("give the runs.csv of a head-to-head run with its full-chain rows (--methods "
                                    f"full,tree), e.g. {PROG} tree-estimate {flags.TREE_CSV}")
    kwargs = {k: v for k, v in vars(args).items() if not k.startswith("_")}  # the benchmark's own keywords
    return args._run(**kwargs)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
