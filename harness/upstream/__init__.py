"""What leaves the harness for a library's maintainers: the reproducer script, its issue text, bisection."""
