"""bwdconv: convolution backward planned per shape.

    import bwdconv
    bwdconv.enable()          # nn.Conv*d / F.conv*d backward, nn.ConvTranspose*d forward
                              # and backward, planned by bwdconv
    bwdconv.enable("aten")    # every aten::convolution_backward in the process
"""

from . import _settings, _tune, grad
from ._explain import (
    Explanation,
    _apply_environment,
    explain,
    force_strategy,
    forced_strategy,
    registry,
    reset_served,
    served,
    strategies,
    swap1x1_writers,
)
from ._kernels import _apply_environment as _apply_kernel_environment
from ._kernels import kernels_on_host, kernels_on_host_enabled
from ._memory import peak_memory
from ._model import ModelExplanation, explain_model
from ._tune import autotuning, clear_decisions, decisions, is_autotuning, set_autotune
from ._weight_cache import reuse_weight_transforms, weight_cache_counts
from .functional import (
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    disable,
    enable,
    enabled,
    is_enabled,
)

__all__ = [
    "enable",
    "disable",
    "is_enabled",
    "enabled",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "grad",
    "explain",
    "Explanation",
    "force_strategy",
    "forced_strategy",
    "strategies",
    "swap1x1_writers",
    "registry",
    "served",
    "reset_served",
    "explain_model",
    "ModelExplanation",
    "autotuning",
    "reuse_weight_transforms",
    "weight_cache_counts",
    "set_autotune",
    "is_autotuning",
    "clear_decisions",
    "decisions",
    "kernels_on_host",
    "kernels_on_host_enabled",
    "peak_memory",
]

__version__ = "0.1.0"

# The BWDCONV_* variables, each checked (bwdconv._settings): a bad one fails
# the import, naming it, except in the doctor, which reports it.
_environment_errors = _settings.environment_errors(
    (_apply_environment, _apply_kernel_environment, _tune._apply_environment))
if not _settings.doctor_is_starting():
    _settings.raise_environment_errors(_environment_errors)
