"""A small case of every strategy on the GPU, for compute-sanitizer: each
forced strategy (swap1x1 with each of its writers), and the rules, compute
both gradients once, in fp32, fp16 and bf16, NCHW and channels_last (64
phases in one case, rows the staged walk takes in another, kernel = stride
in a third);
then transposed convolutions' forwards through each strategy that serves
them.

Each result is held to the GPU check's accuracy rule (bwdconv/_accuracy.py):
its error against a float64 reference (computed on the CPU, so that the
sanitizer sees no more vendor kernels than the calls themselves) at most
twice aten's error in the same dtype under the same TF32 flags, or what a
correct float32 (or, where TF32 is on, TF32) accumulation may lose.

    python scripts/gpu_small_cases.py                    # on the GPU
    python scripts/gpu_small_cases.py --cudnn off        # aten's own kernels and cuBLAS
    BWDCONV_CPU_KERNELS=host python scripts/gpu_small_cases.py --device cpu

`--cudnn off` (torch.backends.cudnn.enabled = False, for aten and the
strategies' sub-convolutions alike) is for racecheck, which instruments
every kernel: under it cuDNN's large-tile kernels take seconds each.
"""

import argparse
import os
import sys

import torch

from bwdconv import _accuracy as accuracy
from bwdconv import _calls as calls

CASES = [((2, 8, 9, 11), (8, 8, 1, 1), [2, 2], [0, 0], [1, 1], 1),
         ((2, 8, 10, 11), (8, 8, 1, 1), [2, 2], [0, 0], [1, 1], 1),  # swap1x1 in_place
         ((2, 8, 9, 11), (8, 4, 3, 3), [2, 2], [1, 1], [1, 1], 2),
         ((1, 4, 5, 6, 7), (4, 4, 3, 2, 3), [2, 1, 2], [1, 0, 1], [1, 2, 1], 1),
         ((1, 8, 9, 10, 11), (8, 8, 5, 5, 5), [4, 4, 4], [2, 1, 0], [1, 1, 1], 1),
         # rows the staged walk takes: NCHW W of 70 at stride 2, and
         # channels_last 3 channels in packets along W
         ((2, 3, 10, 70), (4, 3, 3, 3), [2, 2], [1, 1], [1, 1], 1),
         # kernel = stride (a transposed convolution's U-Net up-convolution,
         # as its matching convolution): swap1x1's taps, one phase each
         ((2, 8, 12, 14), (6, 4, 2, 2), [2, 2], [0, 0], [1, 1], 2),
         # the same, ungrouped
         ((2, 8, 12, 14), (6, 8, 2, 2), [2, 2], [0, 0], [1, 1], 1),
         # issue 40: a stride-1 dim whose padding passes the kernel's extent
         ((2, 19, 23, 2), (6, 19, 4, 4), [2, 1], [0, 1], [1, 1], 1)]
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


MISMATCHES = []


def check(what, dtype, names, ours, atens, references, magnitudes, terms):
    """Records in MISMATCHES each result outside the accuracy rule."""
    device = ours[0].device
    references = [r.to(device) for r in references]
    magnitudes = [m.to(device) for m in magnitudes]
    limits = accuracy.bounds(dtype, atens, references, magnitudes, terms)
    for name, error, (aten_error, limit) in zip(names, accuracy.errors(ours, references),
                                                limits):
        if not accuracy.within(error, limit):
            MISMATCHES.append(f"{what}: {name} error {error:.3g} against float64, above the "
                              f"bound {limit:.3g} (aten's error {aten_error:.3g})")


def backward_cases(bwdconv, device):
    checked = 0
    for case in CASES:
        for dtype in DTYPES:
            for layout in ("nchw", "channels_last"):
                s, p, d, groups = case[2:]
                y_size = calls.conv(*case).output_size()
                x, w, dy = calls.rounded_randn(torch.Generator().manual_seed(checked),
                                               [case[0], case[1], y_size], dtype)
                # The float64 reference and the magnitudes, on the CPU.
                references, magnitudes = accuracy.references(
                    lambda dy, x, w: aten_backward(dy, x, w, case), (dy, x, w))
                terms = list(accuracy.gradient_terms(y_size, case[1], groups))
                x, dy = (calls.laid_out(t.to(device), layout) for t in (x, dy))
                w = w.to(device)
                atens = aten_backward(dy, x, w, case)
                for label, strategy, writer in calls.forcings(bwdconv):
                    try:
                        with bwdconv.force_strategy(strategy, swap1x1_writer=writer):
                            ours = torch.ops.bwdconv.convolution_backward(dy, x, w, s, p, d,
                                                                          groups)
                    except ValueError:
                        continue  # the strategy (or writer) cannot serve this shape
                    check(f"{label} {case} {dtype} {layout}", dtype, ("dx", "dw"),
                          list(ours[:2]), atens, references, magnitudes, terms)
                    checked += 1
    return checked


def aten_backward(dy, x, w, case):
    s, p, d, groups = case[2:]
    gx, gw, _ = torch.ops.aten.convolution_backward(dy, x, w, None, s, p, d, False,
                                                    [0] * len(s), groups, [True, True, False])
    return [gx, gw]


def transposed_forwards(bwdconv, device):
    """conv_transpose2d k2 s2 (U-Net) and k3 s2 p1 op1 (a VAE decoder) through
    every strategy that serves its forward."""
    checked = 0
    for w_size, s, p, op in (((8, 6, 2, 2), 2, 0, 0), ((8, 6, 3, 3), 2, 1, 1)):
        for dtype in (torch.float32, torch.bfloat16):
            x, w = calls.rounded_randn(torch.Generator().manual_seed(100 + checked),
                                       [(2, 8, 9, 10), w_size], dtype)
            def forward(x, w):
                return torch.nn.functional.conv_transpose2d(x, w, None, s, p, op)
            reference, magnitude = accuracy.references(forward, (x, w))
            x, w = x.to(device), w.to(device)
            expected = forward(x, w)
            terms = [accuracy.gradient_terms(x.shape, w_size, 1)[0]]  # the matching dx's
            for strategy in bwdconv.strategies("input"):
                try:
                    with bwdconv.force_strategy(strategy, strict=True):
                        y = torch.ops.bwdconv.conv_transpose(x, w, None, [s, s], [p, p],
                                                             [op, op], 1, [1, 1])
                except ValueError:
                    continue
                what = f"conv_transpose2d forward, {strategy}, k{w_size[2]} s{s} p{p} {dtype}"
                check(what, dtype, ("out",), [y], [expected], [reference], [magnitude], terms)
                checked += 1
    return checked


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--mismatches-pass", action="store_true",
                        help="exit 0 with results outside the accuracy rule (still printed): "
                             "under compute-sanitizer, whose step judges the sanitizer's findings "
                             "(the random step judges accuracy)")
    parser.add_argument("--cudnn", choices=["on", "off"], default="on",
                        help="off: every convolution runs without cuDNN (racecheck)")
    args = parser.parse_args(argv)
    torch.backends.cudnn.enabled = args.cudnn == "on"
    if args.device == "cpu":
        os.environ.setdefault("BWDCONV_CPU_KERNELS", "host")
    import bwdconv

    device = torch.device(args.device)
    checked = backward_cases(bwdconv, device) + transposed_forwards(bwdconv, device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    flags = (f"cuDNN {args.cudnn}; TF32: cudnn {torch.backends.cudnn.allow_tf32}, matmul "
             f"{torch.get_float32_matmul_precision()}")
    for line in MISMATCHES:
        print("mismatch: " + line)
    print(f"all strategies ran on the {device.type}: {checked} calls, "
          f"{len(MISMATCHES)} results outside the accuracy rule ({flags})")
    return 1 if MISMATCHES and not args.mismatches_pass else 0


if __name__ == "__main__":
    sys.exit(main())
