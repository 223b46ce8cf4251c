"""What leaves the harness for the libraries' maintainers: a reproducer script, an issue text, a bisection."""
