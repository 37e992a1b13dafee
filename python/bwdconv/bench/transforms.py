"""What reusing weight transforms buys an inference loop of transposed convolutions.

    python -m bwdconv.bench.transforms [--rounds 12] [--calls 5] [--dtype float32]
                                       [--device D] [--json FILE]

For each layer below and each strategy that serves its forward (forced), an
inference forward (torch.inference_mode) timed with the filter built every
call and inside bwdconv.reuse_weight_transforms() (built once, at a call
that is not timed), and aten's own forward for scale. The sides alternate in
an order drawn at random each round; each round times `--calls` calls of
each side after one untimed call. Medians, and the 25th and 75th
percentiles as the spread.
"""

import argparse
import contextlib
import statistics

import torch

import bwdconv
from bwdconv._overhead import quantile

from . import device as dev
from . import report

# (name, in channels, out channels, kernel, stride, padding, output padding,
# input size): the VAE decoder and DCGAN generator layers of the transposed
# suite, at an inference batch.
LAYERS = [
    ("VAE 512->256 k3 s2 p1 op1", 512, 256, 3, 2, 1, 1, (1, 512, 16, 16)),
    ("DCGAN 256->128 k4 s2 p1", 256, 128, 4, 2, 1, 0, (8, 256, 8, 8)),
]
SIDES = ("aten", "built each call", "reused")


def serving_strategies(layer, x):
    plan = bwdconv.explain(x, layer.weight, list(layer.stride), list(layer.padding),
                           transposed=True, output_padding=list(layer.output_padding))
    return [s for s in bwdconv.strategies("input") if s != "aten" and plan.serves(s, "input")]


def measure(layer, x, strategy, rounds, calls, device):
    """{side: [ms per call]}."""
    def forward():
        with torch.inference_mode():
            layer(x)

    @contextlib.contextmanager
    def planned(reuse):
        with bwdconv.enabled(), bwdconv.force_strategy(strategy, strict=True), \
                (bwdconv.reuse_weight_transforms() if reuse else contextlib.nullcontext()):
            yield

    contexts = {"aten": contextlib.nullcontext,
                "built each call": lambda: planned(False), "reused": lambda: planned(True)}
    return dev.time_in_rounds({side: (forward, contexts[side]) for side in SIDES}, device,
                              [calls] * rounds)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    dev.add_device_option(parser)
    parser.add_argument("--scale", type=int, default=1, help="divide every channel count")
    dev.add_json_option(parser)
    args = parser.parse_args(argv)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    meta = dev.describe(device)
    print(dev.header(meta, args.dtype, f"{args.rounds} rounds of {args.calls} calls a side"))
    rows = []
    for name, c_in, c_out, k, s, p, op, shape in LAYERS:
        torch.manual_seed(0)
        c_in, c_out = c_in // args.scale, c_out // args.scale
        layer = torch.nn.ConvTranspose2d(c_in, c_out, k, s, p, op).to(device, dtype)
        x = torch.randn(shape[0], c_in, *shape[2:], device=device, dtype=dtype)
        for strategy in serving_strategies(layer, x):
            times = measure(layer, x, strategy, args.rounds, args.calls, device)
            median = {side: statistics.median(t) for side, t in times.items()}
            spread = {side: [quantile(t, 0.25), quantile(t, 0.75)] for side, t in times.items()}
            rows.append({"layer": name, "scale": args.scale, "strategy": strategy,
                         "median_ms": median, "p25_p75_ms": spread,
                         "reuse_speedup": median["built each call"] / median["reused"],
                         "reused_over_aten": median["aten"] / median["reused"]})
            print(f"{name} | {strategy:13s} | aten {median['aten']:.3f} ms | built each call "
                  f"{median['built each call']:.3f} ms | reused {median['reused']:.3f} ms | "
                  f"reuse {rows[-1]['reuse_speedup']:.2f}x | reused vs aten "
                  f"{rows[-1]['reused_over_aten']:.2f}x", flush=True)
    report.write_json(args.json, {"meta": meta, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
