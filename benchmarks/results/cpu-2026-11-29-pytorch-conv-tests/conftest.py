"""Enables bwdconv in the scope BWDCONV_TEST_SCOPE names (functional or
aten) before the tests run; without it, the tests run without bwdconv."""
import os
import bwdconv

SCOPE = os.environ.get("BWDCONV_TEST_SCOPE")
if SCOPE:
    bwdconv.enable(scope=SCOPE)
    assert bwdconv.is_enabled(SCOPE)
