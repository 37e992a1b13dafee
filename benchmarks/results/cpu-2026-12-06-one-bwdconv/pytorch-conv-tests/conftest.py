"""Enables bwdconv in the scope BWDCONV_TEST_SCOPE names (functional or aten)
before the tests run, and writes bwdconv.served() to SERVED_OUT when they end;
without BWDCONV_TEST_SCOPE the tests run without bwdconv."""
import json
import os

import bwdconv

SCOPE = os.environ.get("BWDCONV_TEST_SCOPE")
if SCOPE:
    bwdconv.enable(scope=SCOPE)
    assert bwdconv.is_enabled(SCOPE)


def pytest_sessionfinish(session, exitstatus):
    if SCOPE and os.environ.get("SERVED_OUT"):
        served = {kind: {name: count for name, count in by.items() if count}
                  for kind, by in bwdconv.served().items()}
        with open(os.environ["SERVED_OUT"], "w") as out:
            json.dump(served, out, indent=1, sort_keys=True)
