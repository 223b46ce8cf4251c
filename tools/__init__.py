"""Developer tools that sit beside the harness (they may import any of it; the harness imports none of them)."""
