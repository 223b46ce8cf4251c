"""What leaves the harness for upstream: the exported reproducer, and the bisection that probes with it."""
