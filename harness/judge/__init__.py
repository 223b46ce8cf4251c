"""Pure verdicts: bitwise comparison and digests, the tolerance policy, measures, contracts."""
