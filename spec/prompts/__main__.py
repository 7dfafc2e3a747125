"""`python -m spec.prompts`: write the prompt sets (see spec/prompts/sets.py)."""

import sys

from .sets import main

raise SystemExit(main(sys.argv[1:]))
