"""The key of a backward call's measured decision, readable, as the persistent
cache (_cache.py) stores it and explain and the benchmark look it up: the
device (on the CPU, with torch's thread count), the torch and bwdconv
versions, the dtype, both layouts, the full geometry and the wanted
gradients."""

import contextlib
import functools
import platform
import re

import torch

from ._library import _C


@functools.lru_cache(maxsize=None)
def cpu_model():
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


@functools.lru_cache(maxsize=None)
def _gpu_description(index):
    props = torch.cuda.get_device_properties(index)
    if torch.version.hip:
        arch = getattr(props, "gcnArchName", "unknown").split(":")[0]
        return f"hip {props.name} {arch} {props.multi_processor_count} CUs"
    return f"cuda {props.name} sm_{props.major}{props.minor} {props.multi_processor_count} SMs"


def device_description(device, index):
    """What about the device can change a measurement: for a GPU its name,
    architecture and compute-unit count; for the CPU its model and the
    number of threads torch uses."""
    if device == "cpu":
        return f"cpu {cpu_model()} {torch.get_num_threads()} threads"
    return _gpu_description(index if index >= 0 else torch.cuda.current_device())


def _sizes(values):
    return "x".join(map(str, values))


def key_of(request):
    """The cache key of a backward call: device, versions, dtype, both
    layouts, the full geometry and the wanted gradients (the input gradient
    marked when it is a transposed convolution's forward), readable."""
    from . import __version__

    wanted = "+".join(g for g in ("input", "weight") if request[f"wants_{g}"])
    if request.get("transposed"):
        wanted += " (transposed forward, its backward after it)" \
            if recorded_forward(request) else " (transposed forward)"
    return " | ".join([
        device_description(request["device"], request["device_index"]),
        f"torch {torch.__version__}",
        f"bwdconv {__version__}",
        request["dtype"],
        f"input {request['layout']}",
        f"weight {request['weight_layout'] or 'none'}",
        f"conv input {_sizes(request['input_size'])} weight {_sizes(request['weight_size'])} "
        f"stride {_sizes(request['stride'])} padding {_sizes(request['padding'])} "
        f"dilation {_sizes(request['dilation'])} groups {request['groups']}",
        f"grads {wanted}",
    ])


def request_of(input, weight, stride, padding, dilation, groups, wants_input=True,
               wants_weight=True, *, dtype=None, channels_last=None, weight_channels_last=None,
               device=None, device_index=None, transposed=False, records_autograd=False):
    """The fields of a backward call's key, from tensors or sizes (defaults as
    in bwdconv.explain). A convolution of two tensors is keyed in the layout
    PyTorch computes it in (channels_last where either suggests it, as the
    router keys it); a transposed one in its input's."""
    from torch._prims_common import suggest_memory_format

    tensor = input if isinstance(input, torch.Tensor) else None
    sizes = [list(t.shape) if isinstance(t, torch.Tensor) else list(t) for t in (input, weight)]
    if dtype is None:
        dtype = tensor.dtype if tensor is not None else torch.float32
    if channels_last is None and not transposed and tensor is not None and \
            isinstance(weight, torch.Tensor):
        channels_last = _C.computes_channels_last(input, weight)
    if channels_last is None:
        channels_last = tensor is not None and suggest_memory_format(tensor) != torch.contiguous_format
    if weight_channels_last is None:
        weight_channels_last = isinstance(weight, torch.Tensor) and \
            suggest_memory_format(weight) != torch.contiguous_format
    if device is None:
        on_gpu = tensor is not None and tensor.is_cuda
        device = ("hip" if torch.version.hip else "cuda") if on_gpu else "cpu"
    if device_index is None:
        device_index = tensor.device.index if tensor is not None and tensor.is_cuda else -1
    return {"device": device, "device_index": device_index,
            "dtype": str(dtype).replace("torch.", ""),
            "layout": "channels_last" if channels_last else "contiguous",
            "weight_layout": None if not wants_input else
            "channels_last" if weight_channels_last else "contiguous",
            "input_size": sizes[0], "weight_size": sizes[1], "stride": list(stride),
            "padding": list(padding), "dilation": list(dilation), "groups": groups,
            "wants_input": wants_input, "wants_weight": wants_weight, "transposed": transposed,
            "records_autograd": transposed and records_autograd}


def recorded_forward(request):
    """Whether the call is a transposed convolution's forward that autograd
    records, so that its backward follows in the same step (csrc/ops/
    plans.h, BackwardCall::records_autograd)."""
    return bool(request.get("transposed") and request["wants_input"]
                and request.get("records_autograd"))


_KEY_SIZES = re.compile(r" \| conv input ([0-9x]+) weight ([0-9x]+) ")


def sizes_in_key(key):
    """(input sizes, weight sizes) of a key_of key, or None for a key of
    another form."""
    found = _KEY_SIZES.search(key)
    if not found:
        return None
    return tuple([int(v) for v in sizes.split("x")] for sizes in found.groups())
