"""scripts/gpu_check.sh's own control flow, on any machine: a stand-in python
runs every step, one step hangs, and the budget must stop it, skip the rest
and still write the report and the summary."""

import os
import pathlib
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Every step passes at once except the models benchmark, which hangs; the
# report's device query reads its script from stdin.
STAND_IN_PYTHON = """#!/usr/bin/env bash
case "$*" in
  *bwdconv.bench.models*) sleep 120 ;;
  -) cat > /dev/null; echo "- device: stand-in" ;;
  *) exit 0 ;;
esac
"""


def test_a_hanging_step_is_stopped_and_the_report_still_written(tmp_path):
    python = tmp_path / "python"
    python.write_text(STAND_IN_PYTHON)
    python.chmod(0o755)
    out = tmp_path / "check"
    budget = 40  # the script keeps 20 s of it for the report
    env = dict(os.environ, PYTHON=str(python), BWDCONV_GPU_OUT=str(out),
               BWDCONV_GPU_BUDGET=str(budget))
    env.pop("BWDCONV_GPU_STEPS", None)
    start = time.monotonic()
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=env,
                         capture_output=True, text=True, timeout=budget + 60)
    elapsed = time.monotonic() - start

    def status(step):
        return (out / f"{step}.status").read_text()

    assert elapsed < budget + 15, elapsed
    assert status("build").startswith("passed")
    assert status("bench").startswith("passed")
    assert status("models").startswith("TIMED OUT")
    assert status("models_bf16").startswith("skipped")
    report = (out / "report.md").read_text()
    assert "- device: stand-in" in report
    assert "| models | TIMED OUT" in report and "| models_bf16 | skipped" in report
    summary = run.stdout.strip().splitlines()
    assert summary[-1].startswith("models_bf16") and "skipped" in summary[-1]


# pip's build fails as setup.py refuses a compiler that links its own
# libstdc++, unless the compiler is the g++ on PATH.
STATICALLY_LINKING_COMPILER = """#!/usr/bin/env bash
case "$*" in
  *"pip install"*)
    [ "$CXX" = "$(command -v g++)" ] && exit 0
    echo "error: _C.so holds its own copy of libstdc++ (the compiler $CXX links it statically)"
    exit 1 ;;
  -) cat > /dev/null; echo "- device: stand-in" ;;
  *) exit 0 ;;
esac
"""


def test_a_build_refused_for_a_private_libstdcxx_is_redone_with_the_g_plus_plus_on_path(
        tmp_path):
    python = tmp_path / "python"
    python.write_text(STATICALLY_LINKING_COMPILER)
    python.chmod(0o755)
    out = tmp_path / "check"
    env = dict(os.environ, PYTHON=str(python), BWDCONV_GPU_OUT=str(out),
               BWDCONV_GPU_STEPS="build", CXX="/opt/elsewhere/g++")
    subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=env,
                   capture_output=True, text=True, timeout=120)
    assert (out / "build.status").read_text().startswith("passed")
    assert "again with the g++ on PATH" in (out / "build.log").read_text()
