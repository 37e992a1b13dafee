"""The supported torch range: one minimum (python/bwdconv/_version.py) that the
import, setup.py, pyproject.toml, the README and the matrix script agree on,
and a torch older than it refused with one clear message."""

import pathlib
import re
import subprocess
import sys

import pytest
import torch

from bwdconv import _version

ROOT = pathlib.Path(__file__).resolve().parents[1]
OLD_TORCH = "2.7.1"  # a real release: it lacks bmm with an out_dtype


def run_python(code):
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("version, expected", [
    ("2.8.0", (2, 8)), ("2.10.0+cu128", (2, 10)), ("2.15.0a0+git1234", (2, 15)), ("3.0", (3, 0)),
])
def test_release_reads_major_and_minor(version, expected):
    assert _version.release(version) == expected


def test_release_refuses_what_is_no_version():
    with pytest.raises(ValueError, match="not a torch version"):
        _version.release("nightly")


def test_minors_compare_as_numbers():
    # "2.10" < "2.8" as text: the check must compare numbers.
    assert _version.too_old_message("2.10.0") is None
    assert _version.too_old_message("3.0.0") is None
    assert _version.too_old_message(torch.__version__) is None
    assert _version.too_old_message(OLD_TORCH) is not None
    assert _version.too_old_message("1.13.1") is not None


def test_import_refuses_an_older_torch_naming_both_versions():
    # A fresh interpreter whose torch reports an older release than the minimum.
    result = run_python(f"import torch; torch.__version__ = {OLD_TORCH!r}; import bwdconv")
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: "), result.stderr
    assert f"torch>={_version.TORCH_MINIMUM}" in last and f"torch {OLD_TORCH}" in last, last


def test_import_accepts_the_installed_torch():
    result = run_python("import bwdconv; print(bwdconv._library._C is not None)")
    assert result.returncode == 0 and result.stdout.strip() == "True", result.stderr


def test_setup_refuses_to_build_against_an_older_torch():
    # setup.py stops before setup() runs: nothing is built or written.
    code = ("import runpy, sys, torch\n"
            f"torch.__version__ = {OLD_TORCH!r}\n"
            "sys.argv = ['setup.py', '--version']\n"
            "runpy.run_path('setup.py', run_name='__main__')\n")
    result = run_python(code)
    assert result.returncode != 0
    assert result.stdout == "", result.stdout
    message = result.stderr.strip().splitlines()[-1]
    assert message == f"error: {_version.too_old_message(OLD_TORCH)}", result.stderr


def requirement_of(text, where):
    found = re.findall(r'"torch>=([0-9.]+)"', text)
    assert len(found) == 1, f"{where}: expected one torch requirement, found {found}"
    return found[0]


def test_one_minimum_everywhere():
    minimum = _version.TORCH_MINIMUM
    assert requirement_of((ROOT / "pyproject.toml").read_text(), "pyproject.toml") == minimum
    setup = (ROOT / "setup.py").read_text()
    assert "TORCH_MINIMUM" in setup and "torch>=" in setup and not re.search(r"torch>=\d", setup)
    readme = (ROOT / "README.md").read_text()
    stated = set(re.findall(r"torch>=([0-9.]+)", readme))
    assert stated == {minimum}, f"README.md states torch>= {stated}, _version.py {minimum}"
    matrix = (ROOT / "scripts" / "torch_matrix.sh").read_text()
    supported = re.search(r"^SUPPORTED=\(([^)]*)\)", matrix, re.M).group(1).split()
    assert _version.release(supported[0]) == _version.release(minimum), supported
    minors = [_version.release(v) for v in supported]
    assert minors == sorted(set(minors)), f"one release per minor, oldest first: {supported}"
