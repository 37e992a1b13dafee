"""The setup scripts' shared pieces (scripts/common.sh) and setup.py's
choice of objects directory, without building: the device code the main
job asks for, the environment the scripts use and name, and the progress
of long steps."""

import os
import pathlib
import runpy
import subprocess
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMMON = ROOT / "scripts" / "common.sh"


def bash(script, env=None, path_first=None):
    """Runs `script` after sourcing common.sh; returns the completed process."""
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("TORCH_CUDA_ARCH_LIST", "PYTORCH_ROCM_ARCH", "BWDCONV_FORCE_CPU",
                                "BWDCONV_VENV", "VIRTUAL_ENV", "PYTHON")}
    if path_first:
        environment["PATH"] = f"{path_first}:/usr/bin:/bin"
    environment.update(env or {})
    return subprocess.run(["bash", "-c", f"set -euo pipefail; ROOT={ROOT}; source {COMMON}\n"
                           + script], capture_output=True, text=True, env=environment,
                          timeout=60)


def fake_tools(directory, **tools):
    """Executables named by the keywords, printing their values."""
    directory.mkdir(exist_ok=True)
    for name, output in tools.items():
        tool = directory / name
        tool.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}\nEOF\n")
        tool.chmod(0o755)
    return directory


CHOICE = 'choose_device_code; echo "cuda=${TORCH_CUDA_ARCH_LIST:-}|rocm=${PYTORCH_ROCM_ARCH:-}' \
    '|cpu=${BWDCONV_FORCE_CPU:-}|none=$NO_GPU_FOUND"; echo "$DEVICE_CODE"'


def test_the_main_job_builds_no_device_code_without_a_gpu(tmp_path):
    # nvidia-smi that finds no GPU; ROCm's enumerator listing the CPU agent only.
    tools = fake_tools(tmp_path / "bin", **{"nvidia-smi": "", "rocm_agent_enumerator": "gfx000"})
    done = bash(CHOICE, path_first=tools)
    assert done.returncode == 0, done.stderr
    chosen, words = done.stdout.splitlines()
    assert chosen == "cuda=|rocm=|cpu=1|none=1"
    assert words.startswith("none: no GPU found, so the CPU-only build")


def test_the_main_job_builds_for_the_gpus_present(tmp_path):
    tools = fake_tools(tmp_path / "bin", **{
        "nvidia-smi": "NVIDIA H200, 9.0\nNVIDIA H200, 9.0\nNVIDIA A100-SXM4-80GB, 8.0"})
    chosen, words = bash(CHOICE, path_first=tools).stdout.splitlines()
    assert chosen == "cuda=8.0;9.0|rocm=|cpu=|none=0"
    assert words == "CUDA 8.0;9.0, the GPUs present (NVIDIA A100-SXM4-80GB,NVIDIA H200, " \
        "seen by nvidia-smi)"
    tools = fake_tools(tmp_path / "amd", **{"nvidia-smi": "", "rocm_agent_enumerator":
                                            "gfx000\ngfx942\ngfx942"})
    chosen, _ = bash(CHOICE, path_first=tools).stdout.splitlines()
    assert chosen == "cuda=|rocm=gfx942|cpu=|none=0"


def test_torch_finds_a_gpu_the_tools_do_not(tmp_path):
    """A container without nvidia-smi: the GPUs torch sees decide."""
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\ncat >/dev/null\necho 'cuda|NVIDIA H100|9.0'\n")
    python.chmod(0o755)
    tools = fake_tools(tmp_path / "bin", **{"nvidia-smi": ""})
    chosen, words = bash(CHOICE, env={"PYTHON": str(python)}, path_first=tools).stdout.splitlines()
    assert chosen == "cuda=9.0|rocm=|cpu=|none=0" and "seen by torch" in words


@pytest.mark.parametrize("asked, expected", [
    ({"TORCH_CUDA_ARCH_LIST": "8.6"}, "cuda=8.6|rocm=|cpu=|none=0"),
    ({"PYTORCH_ROCM_ARCH": "gfx90a"}, "cuda=|rocm=gfx90a|cpu=|none=0"),
    ({"BWDCONV_FORCE_CPU": "1"}, "cuda=|rocm=|cpu=1|none=0"),
])
def test_the_architectures_asked_for_win_over_the_gpus_present(tmp_path, asked, expected):
    tools = fake_tools(tmp_path / "bin", **{"nvidia-smi": "NVIDIA H200, 9.0"})
    chosen, words = bash(CHOICE, env=asked, path_first=tools).stdout.splitlines()
    assert chosen == expected
    assert "asked" in words or "asks" in words


def test_setup_refuses_an_unknown_device_code_before_doing_anything():
    done = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh"), "--device-code", "some"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "must be all or present" in done.stderr


def test_the_scripts_use_the_active_environment_and_say_how_to_enter_theirs(tmp_path):
    default = pathlib.Path.home() / ".cache" / "bwdconv" / "venv"
    assert bash("bwdconv_venv").stdout.strip() == str(default)
    active = {"VIRTUAL_ENV": str(tmp_path / "mine")}
    assert bash("bwdconv_venv", env=active).stdout.strip() == str(tmp_path / "mine")
    assert bash("bwdconv_venv", env={**active, "BWDCONV_VENV": "/x"}).stdout.strip() == "/x"

    (tmp_path / "mine").mkdir()
    told = bash(f"print_how_to_enter {tmp_path / 'mine'}").stdout
    assert f"source {tmp_path / 'mine'}/bin/activate" in told
    told = bash(f"print_how_to_enter {tmp_path / 'mine'}", env=active).stdout
    assert "active environment" in told and "activate" not in told


def test_the_bench_and_test_commands_end_by_naming_the_environment():
    for script in ("bench.sh", "test.sh"):
        lines = [line for line in (ROOT / "scripts" / script).read_text().splitlines()
                 if line.strip() and not line.startswith("#")]
        assert any(line.startswith("print_how_to_enter ") for line in lines[-3:]), script
    assert "--device-code present" in (ROOT / "scripts" / "bench.sh").read_text()


def test_the_test_command_runs_the_full_set_only_when_asked():
    """The README's test command builds the extension for the machine's own
    device code and CMake compiles every kernel for the targets whose
    compilers are installed; CI's (.ci/run) passes --full, which builds the
    extension for every target too, the sanitizers' suites and the kernel
    report. Either way the other arguments go to pytest."""
    text = (ROOT / "scripts" / "test.sh").read_text()
    full_only = text.split('if [ "$full" = 1 ]; then')
    assert "device_code=present" in text and "device_code=all\n  full=1" in text
    assert 'bash "$ROOT/scripts/setup.sh" --device-code "$device_code"' in text
    assert "-DBWDCONV_SANITIZERS=ON" in full_only[1].split("else")[0]
    assert "-DBWDCONV_SANITIZERS=OFF" in text
    assert any("kernel_report.py" in block.split("\nfi")[0] for block in full_only[1:])
    assert "bash scripts/test.sh --full" in (ROOT / ".ci" / "run").read_text()
    assert 'pytest tests -q -p no:cacheprovider' in text and '"$@"' in text


def test_a_long_step_shows_its_progress_and_a_line_while_silent(tmp_path):
    command = textwrap.dedent(f"""\
        echo "[1/3] /usr/bin/c++ -MMD -c {ROOT}/csrc/ops/a.cpp -o a.o"
        echo "noise"
        sleep 3
        echo "  [2/3] /usr/local/cuda/bin/nvcc -c {ROOT}/csrc/hip/b.cu -o b.o"
        """)  # pip -v indents the build's lines
    (tmp_path / "step.sh").write_text(command)
    done = bash(f"progress_every=1 run_with_progress step '^ *\\[[0-9]+/[0-9]+\\] ' '' "
                f"bash {tmp_path / 'step.sh'}")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "   [1/3] c++ csrc/ops/a.cpp"
    assert lines[-1] == "   [2/3] nvcc csrc/hip/b.cu"
    assert any(line.startswith("   step: still running, ") for line in lines[1:-1]), lines
    assert "noise" not in done.stdout


def test_a_failing_step_shows_the_end_of_its_log_and_its_status(tmp_path):
    log = tmp_path / "step.log"
    done = bash(f"run_with_progress step x {log} bash -c 'echo first; echo last words; exit 7' "
                "|| echo status=$?")
    assert "== step failed (exit status 7)" in done.stdout
    assert "last words" in done.stdout and done.stdout.strip().endswith("status=7")
    assert "last words" in log.read_text()


def test_the_build_inputs_digest_follows_the_sources_not_the_build_outputs(tmp_path):
    """What a prebuilt GPU wheel was built from (gpu_wheel.sh, gpu_check.sh)."""
    for name in ("setup.py", "pyproject.toml", "csrc/ops/a.cpp", "python/bwdconv/__init__.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)

    def digest():
        done = bash(f"build_inputs_digest {tmp_path}")
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    first = digest()
    assert len(first) == 64
    for output in ("python/bwdconv/_C.cpython-312-x86_64-linux-gnu.so", "python/bwdconv/_build.json",
                   "python/bwdconv/__pycache__/x.cpython-312.pyc", "python/bwdconv.egg-info/PKG-INFO"):
        (tmp_path / output).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / output).write_text("built")
    assert digest() == first
    (tmp_path / "csrc/ops/a.cpp").write_text("changed")
    changed = digest()
    assert changed != first
    (tmp_path / "csrc/ops/a.cpp").rename(tmp_path / "csrc/ops/b.cpp")
    assert digest() not in (first, changed)


@pytest.fixture(scope="module")
def setup_functions():
    """setup.py's functions, without running setup()."""
    return runpy.run_path(str(ROOT / "setup.py"), run_name="bwdconv_setup_functions")


def test_every_set_of_targets_keeps_its_own_objects(setup_functions):
    directory = setup_functions["objects_directory"]
    build = str(ROOT / "build" / "extension")
    cpu = directory(None, "", False)
    every_cuda = directory("cuda", "8.0;9.0", False)
    assert cpu == build
    assert every_cuda == build + "-cuda-8.0_9.0"
    assert directory("cuda", "8.0 9.0", False) == every_cuda  # the same targets
    others = [directory("cuda", "9.0", False), directory("cuda", "9.0", True),
              directory(None, "", True), directory("hip", "gfx90a;gfx940", False),
              directory("hip", "gfx942:sramecc+:xnack-", False)]
    assert len({cpu, every_cuda, *others}) == 2 + len(others)
    assert all(d.startswith(build + "-") and "/" not in d[len(build):] for d in others)


def test_the_build_says_what_device_code_it_compiles(setup_functions, monkeypatch):
    describe = setup_functions["describe_targets"]
    monkeypatch.setenv("BWDCONV_FORCE_CPU", "1")
    assert describe(None).startswith("none (BWDCONV_FORCE_CPU=1)")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert describe("cuda") == "cuda kernels for 9.0 and the host target"


def test_every_kernel_source_gets_one_host_target_unit_rewritten_only_when_it_changes(
        setup_functions, tmp_path):
    """setup.py compiles each csrc/hip/*.cu for the host target through a unit
    written from csrc/hip/host_target.cpp.in; an unchanged unit keeps its
    time, so that ninja recompiles nothing."""
    write = setup_functions["host_target_sources"]
    units = [pathlib.Path(p) for p in write(str(tmp_path))]
    kernels = sorted((ROOT / "csrc" / "hip").glob("*.cu"))
    assert [u.stem for u in units] == [k.stem for k in kernels]
    for unit, kernel in zip(units, kernels):
        text = unit.read_text()
        assert "#define BWDCONV_HOST_TARGET 1" in text and f'#include "hip/{kernel.name}"' in text
    times = [u.stat().st_mtime_ns for u in units]
    os.utime(units[0], ns=(1, 1))  # an old time: a rewrite would change it
    write(str(tmp_path))
    assert units[0].stat().st_mtime_ns == 1
    units[1].write_text("stale")
    write(str(tmp_path))
    assert "BWDCONV_HOST_TARGET" in units[1].read_text()
    assert [u.stat().st_mtime_ns for u in units[2:]] == times[2:]
