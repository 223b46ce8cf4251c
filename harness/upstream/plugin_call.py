"""Run as a child (``python -m harness.upstream.plugin_call PLUGINS_JSON SUBJECT``, in the working directory):
load the plug-ins, print the subject's role and library call (its module file, function name and params) as one
JSON line. A plug-in is imported only here, never in the harness's own process."""

import inspect
import json
import sys


def main(argv: list[str]) -> int:
    from harness.subjects.call_runs import call_of
    from harness.subjects.registry import get_subject, load_plugin

    for p in json.loads(argv[1]):
        load_plugin(p, in_process=True)
    subject = get_subject(argv[2])
    call = call_of(subject.run)
    found = None if call is None else [inspect.getsourcefile(call.fn), call.fn.__name__, dict(call.params)]
    print(json.dumps({"role": subject.role, "call": found}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
