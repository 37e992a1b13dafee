"""The oldest torch bwdconv supports: the one place that says so.

setup.py runs this file on its own (runpy, before bwdconv is importable) to
refuse a build against an older torch and to write install_requires;
bwdconv._library calls check_torch before loading the compiled extension.
Plain Python only: no import of torch or of the package.
"""

import re

# The oldest minor release scripts/torch_matrix.sh builds and tests. Older
# releases lack what bwdconv is built on:
# - 2.6: torch.compiler's exporting flag, by which the functional scope tells
#   torch.export's tracing from other calls (python/bwdconv/functional.py).
TORCH_MINIMUM = "2.8"


def release(version):
    """(major, minor) of a torch version string: "2.8.0+cu128" -> (2, 8)."""
    match = re.match(r"(\d+)\.(\d+)", str(version))
    if match is None:
        raise ValueError(f"not a torch version: {version!r}")
    return int(match.group(1)), int(match.group(2))


def too_old_message(installed):
    """Why `installed` cannot serve, or None when it can."""
    if release(installed) >= release(TORCH_MINIMUM):
        return None
    return (f"bwdconv needs torch>={TORCH_MINIMUM}, but torch {installed} is installed: "
            f"install torch {TORCH_MINIMUM} or newer and build bwdconv against it "
            "(`pip install --no-build-isolation .`)")


def check_torch(installed):
    """Raises ImportError when torch `installed` is older than TORCH_MINIMUM."""
    message = too_old_message(installed)
    if message is not None:
        raise ImportError(message)
