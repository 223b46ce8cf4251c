"""`python -m harness`: the command line (see harness/cli.py)."""

import sys

from harness.core.lifeline import adopt

adopt()  # a harness started by a harness (sandboxed verbs) dies with it

from harness.cli import main  # noqa: E402

sys.exit(main())
