"""Project-wide pytest set-up: the harness plugin (options, header, devices, profiles)."""

pytest_plugins = ("harness.pytest_plugin",)
