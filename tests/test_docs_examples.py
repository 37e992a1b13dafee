"""Every Python example in the README and docs/ runs as written, each in a
fresh interpreter (so that one example's enable() or autotuning does not
help another), with a decisions cache of its own."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def examples():
    for page in PAGES:
        for number, block in enumerate(BLOCK.findall(page.read_text()), 1):
            yield pytest.param(block, id=f"{page.relative_to(ROOT)}#{number}")


def test_the_readme_has_examples():
    assert len(BLOCK.findall((ROOT / "README.md").read_text())) >= 2


@pytest.mark.parametrize("code", list(examples()))
def test_example_runs_as_written(code, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BWDCONV_")}
    env["BWDCONV_CACHE_DIR"] = str(tmp_path)
    env["BWDCONV_AUTOTUNE_KEY_SECONDS"] = "0.05"  # an example that tunes tunes briefly
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
