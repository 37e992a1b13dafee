"""Where a strategy's peak memory goes: the GPU check's `memory` step.

On an H200 scatter's input gradient of the seed line
`conv n8 c1024 28x28 k512 2x2/2x2` once peaked at 18.2 GB, 132x aten's
(issue 40), while its buffer is 14 MB. This probe splits the call: the peak
memory one call adds (bwdconv.peak_memory) for aten's input gradient,
scatter's forced, and scatter's two parts computed here with plain torch
ops as docs/DESIGN.md ("scatter") describes them: the zero-inserted padded
buffer, and the stride-1 convolution of that buffer with the adjoint filter.
Each under TF32 on and off (cuDNN's allow_tf32 and the float32 matmul
precision) and cudnn.benchmark off and on, so that a peak that belongs to the convolution's library
workspace shows as such, and which setting brings it.

    python scripts/gpu_memory_probe.py [--device cuda] [--scale 1] [--json FILE]

--scale N divides the batch and channels (the CPU test runs it small).
"""

import argparse
import sys

import torch
import torch.nn.functional as F

import bwdconv
from bwdconv import _memory
from bwdconv.bench import device as dev

# (name, input size, weight size, stride): the seed line of the 18.2 GB peak.
LINES = [("conv n8 c1024 28x28 k512 2x2/2x2", (8, 1024, 28, 28), (512, 1024, 2, 2), 2)]


def scaled(line, scale):
    name, x, w, stride = line
    if scale > 1:
        name += f" (batch and channels / {scale})"
    return name, (max(1, x[0] // scale), x[1] // scale, *x[2:]), \
        (w[0] // scale, w[1] // scale, *w[2:]), stride


def buffer_of(dy, x_size, w_size, stride):
    """The zero-inserted buffer: dy[o] at o*stride + (k-1), length I + k - 1
    per spatial dim (no padding, no dilation: the probe's lines)."""
    sizes = [dy.shape[0], dy.shape[1]] + [i + k - 1 for i, k in zip(x_size[2:], w_size[2:])]
    buffer = dy.new_zeros(sizes)
    slots = tuple(slice(k - 1, k - 1 + (o - 1) * stride + 1, stride)
                  for o, k in zip(dy.shape[2:], w_size[2:]))
    buffer[(slice(None), slice(None)) + slots] = dy
    return buffer


def adjoint(w):
    return w.transpose(0, 1).flip(list(range(2, w.dim())))


def calls(x, w, dy, stride):
    x_size = tuple(x.shape)
    args = ([stride] * 2, [0, 0], [1, 1], 1)
    buffer = buffer_of(dy, x_size, tuple(w.shape), stride)
    filter_ = adjoint(w)

    def aten():
        return torch.ops.aten.convolution_backward(dy, x, w, None, *args[:3], False, [0, 0], 1,
                                                   [True, False, False])[0]

    def scatter():
        with bwdconv.force_strategy("scatter", strict=True):
            return torch.ops.bwdconv.convolution_backward_input(dy, w, list(x_size), *args)

    return {"aten": aten, "scatter": scatter,
            "scatter: buffer": lambda: buffer_of(dy, x_size, tuple(w.shape), stride),
            "scatter: stride-1 convolution": lambda: F.conv2d(buffer, filter_)}


def probe(line, device, dtype):
    name, x_size, w_size, stride = line
    torch.manual_seed(0)
    w = torch.randn(w_size, device=device, dtype=dtype)
    out = [(o - k) // stride + 1 for o, k in zip(x_size[2:], w_size[2:])]
    dy = torch.randn(x_size[0], w_size[0], *out, device=device, dtype=dtype)
    x = torch.empty(x_size, device=device, dtype=dtype)  # aten reads its size only
    reference = calls(x, w, dy, stride)["aten"]()
    rows = []
    for tf32 in (True, False):
        for benchmark in (False, True):
            with dev.backend_flags(tf32, benchmark):
                fns = calls(x, w, dy, stride)
                for part, fn in fns.items():  # aten, scatter, then scatter's parts
                    fn()  # warm-up: cuDNN's benchmark search, first allocations
                    with _memory.peak_memory(device) as peak:
                        result = fn()
                    if part in ("scatter", "scatter: stride-1 convolution"):
                        error = (result.double() - reference.double()).abs().max().item()
                    else:
                        error = None
                    rows.append({"line": name, "dtype": str(dtype).replace("torch.", ""),
                                 "allow_tf32": tf32, "cudnn_benchmark": benchmark,
                                 "part": part, "peak_bytes": peak.bytes,
                                 "max_error_vs_aten": error})
                    del result
    return rows


def table(rows):
    lines = ["| line | dtype | allow_tf32 | benchmark | part | peak MB | vs aten | error vs aten |",
             "|---|---|---|---|---|---|---|---|"]
    aten = {(r["line"], r["dtype"], r["allow_tf32"], r["cudnn_benchmark"]): r["peak_bytes"]
            for r in rows if r["part"] == "aten"}
    for r in rows:
        base = aten[(r["line"], r["dtype"], r["allow_tf32"], r["cudnn_benchmark"])]
        ratio = f"{r['peak_bytes'] / base:.2f}x" if base else "-"
        error = "-" if r["max_error_vs_aten"] is None else f"{r['max_error_vs_aten']:.3g}"
        lines.append(f"| {r['line']} | {r['dtype']} | {r['allow_tf32']} | "
                     f"{r['cudnn_benchmark']} | {r['part']} | {r['peak_bytes'] / 1e6:.1f} | "
                     f"{ratio} | {error} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    dev.add_device_option(parser)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    dev.add_json_option(parser)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    rows = []
    for line in LINES:
        for dtype in args.dtypes:
            rows += probe(scaled(line, args.scale), device, getattr(torch, dtype))
    print(table(rows))
    dev.write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
