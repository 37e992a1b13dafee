"""What `pip install .` puts in site-packages works outside the checkout: the
files setuptools installs for the Python package (build_py, package data
included), with this build's extension beside them, run from a directory
that is not the checkout."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import bwdconv

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The package as setuptools installs it, in a directory of its own."""
    lib = tmp_path_factory.mktemp("site-packages")
    env = dict(os.environ, BWDCONV_FORCE_CPU="1")
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(lib)],
                   cwd=ROOT, env=env, check=True, capture_output=True)
    extension = pathlib.Path(bwdconv._library._C.__file__)
    shutil.copy(extension, lib / "bwdconv" / extension.name)
    return lib


def run_installed(lib, code, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BWDCONV_")}
    env.update(PYTHONPATH=str(lib), BWDCONV_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=True).stdout


def test_the_suites_ship_with_the_package_and_are_found_from_anywhere(installed, tmp_path):
    code = ("import bwdconv, pathlib; from bwdconv.bench import cli; "
            "print(pathlib.Path(bwdconv.__file__).parent); "
            "print(*cli.known_suites()); print(cli.suite_path('seeds')); "
            "print(len(cli.read_suite(cli.suite_path('seeds'))))")
    package, suites, seeds, count = run_installed(installed, code, tmp_path).splitlines()
    assert pathlib.Path(package) == installed / "bwdconv"  # not the checkout's
    assert suites.split() == ["r3d18", "resnet50", "seeds", "transposed"]
    assert pathlib.Path(seeds).is_relative_to(installed)
    assert int(count) > 0


def test_the_tuners_help_lists_the_shipped_suites_from_anywhere(installed, tmp_path):
    code = ("import sys; from bwdconv import tune; "
            "sys.argv = ['tune', '--help']; tune.main()")
    env_help = subprocess.run([sys.executable, "-c", code], cwd=tmp_path,
                              env=dict(os.environ, PYTHONPATH=str(installed)),
                              capture_output=True, text=True)
    assert "r3d18, resnet50, seeds, transposed" in " ".join(env_help.stdout.split())
