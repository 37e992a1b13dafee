"""The BWDCONV_* environment variables and what each one means, in one table.

`python -m bwdconv` shows the ones in effect with their meaning; the project's
tests check this table against docs/environment.md (which also gives defaults
and who reads each one) and against the code that reads them.
"""

import os

PREFIX = "BWDCONV_"

# name -> (when it is read, what it does)
MEANINGS = {
    "BWDCONV_STRATEGY": ("runtime", "forces a strategy on every gradient it can serve"),
    "BWDCONV_STRATEGY_STRICT": ("runtime", "1 (or true, yes, on): the forcing is strict, a call "
                                           "the forced strategy or writer cannot serve raises"),
    "BWDCONV_SWAP1X1_WRITER": ("runtime", "forces how swap1x1 writes dx: fused or in_place"),
    "BWDCONV_AUTOTUNE": ("runtime", "1 (or true, yes, on): autotuning on for the process"),
    "BWDCONV_AUTOTUNE_BUDGET": ("runtime", "seconds of tuning per process"),
    "BWDCONV_AUTOTUNE_KEY_SECONDS": ("runtime", "the time cap for tuning one shape"),
    "BWDCONV_MEMORY_BUDGET": ("runtime", "how much more memory than aten a tuned choice may "
                                         "take: gradient, a byte count or a factor such as 1.5x"),
    "BWDCONV_CACHE_DIR": ("runtime", "the directory of the measured decisions' file"),
    "BWDCONV_CPU_KERNELS": ("runtime", "host: CPU tensors run the GPU kernels on the host "
                                       "grid; aten: ATen moves the data (default)"),
    "BWDCONV_FORCE_CPU": ("build", "1: build the C++ ops only, without the GPU kernels"),
    "BWDCONV_DEBUG": ("build", "1: compile the host C++ with -O0 -g and assertions"),
    "BWDCONV_VENV": ("scripts", "the virtual environment the scripts create and use"),
    "BWDCONV_TORCH": ("scripts", "the torch requirement setup.sh installs"),
    "BWDCONV_TORCHVISION": ("scripts", "the torchvision requirement setup.sh installs"),
    "BWDCONV_MATRIX_PAUSE_FILE": ("scripts", "torch_matrix.sh waits while this file exists"),
    "BWDCONV_CI_OLDEST_TORCH": ("scripts", "1: CI also smoke-tests the oldest supported torch"),
    "BWDCONV_CMAKE_BUILD": ("scripts", "the CMake build directory of test.sh"),
    "BWDCONV_GPU_STEPS": ("scripts", "the gpu_check.sh steps to run"),
    "BWDCONV_GPU_BUDGET": ("scripts", "seconds for the whole gpu_check.sh"),
    "BWDCONV_GPU_OUT": ("scripts", "the directory gpu_check.sh writes its report to"),
    "BWDCONV_GPU_RANDOM_CASES": ("scripts", "cases the gpu_check.sh random step runs"),
    "BWDCONV_GPU_RANDOM_SECONDS": ("scripts", "seconds the gpu_check.sh random step may take"),
    "BWDCONV_STEP_SECONDS": ("scripts", "a gpu_check.sh step's limit, for its scripts"),
    "BWDCONV_WHEEL": ("scripts", "the prebuilt wheel gpu_check.sh installs"),
    "BWDCONV_WHEEL_CACHE": ("scripts", "gpu_wheel.sh's cache of its environment"),
    "BWDCONV_WHEEL_OUT": ("scripts", "where gpu_wheel.sh writes the wheel"),
    "BWDCONV_WHEEL_PYTHON": ("scripts", "the Python 3.12 gpu_wheel.sh builds with"),
    "BWDCONV_WHEEL_TORCH": ("scripts", "the torch gpu_wheel.sh builds against"),
    "BWDCONV_TEST_SEED": ("tests", "the seed of the randomized shape grids of the tests"),
}


def in_effect(environ=None):
    """[{name, value, read, meaning}] for every BWDCONV_* variable set, by name;
    a name bwdconv does not know has read and meaning None."""
    environ = os.environ if environ is None else environ
    rows = []
    for name in sorted(n for n in environ if n.startswith(PREFIX)):
        read, meaning = MEANINGS.get(name, (None, None))
        rows.append({"name": name, "value": environ[name], "read": read, "meaning": meaning})
    return rows
