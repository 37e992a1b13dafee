"""One layer's call through a forced strategy, repeated, for a profiler to
capture, on demand:

    python scripts/gpu_profile.py --strategy swap1x1 --writer fused
    ncu -k regex:interleave --launch-skip 2 --launch-count 1 --set full \\
        python scripts/gpu_profile.py --strategy swap1x1 --writer fused

The layer is the U-Net up-convolution of the transposed suite,
ConvTranspose2d 128->64 k2 s2 on 8x128x128x128 in bfloat16 (NCHW unless
--channels-last; --scale divides the batch and the spatial sizes), its
forward computed by the forced strategy, `--calls` times after one warm-up
call. Each call's output is checked against aten's once, so that what the
profiler times is a correct call. Prints the median call time (CUDA events
on a GPU), which a profiler's replay lengthens.
"""

import argparse
import statistics
import sys

import torch


def layer(scale, channels_last, device, dtype):
    """(x, w): the U-Net k2 s2 up-convolution's input and weight."""
    g = torch.Generator().manual_seed(0)
    batch, size = max(1, 8 // scale), max(2, 128 // scale)
    x = torch.randn(batch, 128, size, size, generator=g).to(device=device, dtype=dtype)
    w = (torch.randn(128, 64, 2, 2, generator=g) / 16).to(device=device, dtype=dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    return x, w


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategy", default="swap1x1")
    parser.add_argument("--writer", default=None, help="swap1x1's writer, forced")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--calls", type=int, default=5)
    import bwdconv
    from bwdconv.bench import device as dev

    dev.add_device_option(parser)
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    x, w = layer(args.scale, args.channels_last, device, torch.bfloat16)

    def call():
        with bwdconv.force_strategy(args.strategy, swap1x1_writer=args.writer, strict=True):
            return torch.ops.bwdconv.conv_transpose(x, w, None, [2, 2], [0, 0], [0, 0], 1, [1, 1])

    expected = torch.nn.functional.conv_transpose2d(x, w, None, 2)
    got = call()
    error = (got.float() - expected.float()).abs().max().item()
    scale = expected.float().abs().max().item()
    if not error <= 0.02 * scale:
        print(f"{args.strategy}: max error {error:.3g} against aten's result (largest {scale:.3g})")
        return 1
    milliseconds = dev.time_ms(call, device, warmup=0, iterations=args.calls)
    print(f"{args.strategy}{f'[{args.writer}]' if args.writer else ''} "
          f"{'channels_last' if args.channels_last else 'NCHW'} {tuple(x.shape)}: "
          f"median {statistics.median(milliseconds):.3f} ms over {args.calls} calls "
          f"(max error {error:.3g}, largest {scale:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
