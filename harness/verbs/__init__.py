"""The verbs: one module each, a frozen ``Options`` record and one function over it.

``harness/cli.py`` builds each record from the command line and checks it once; Python callers build it
directly (``harness.verbs.export.export(ExportOptions(...))``). Nothing below this package sees argparse.
A verb returns its exit code: 0 nothing found, 1 a finding, 2 bad input (raised as ``HarnessError``).
"""
