"""The mutation check of the gate: ``python -m tools.mutants`` (``make mutants``). See README "How strong is
the gate"."""
