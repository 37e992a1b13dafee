"""End-to-end backward time of real models with bwdconv enabled and disabled.

    python -m bwdconv.bench.models [--models resnet18 resnet50 r3d18 unet dcgan] [--steps 7]
                                   [--scale 1] [--fixed-heap]

For each model (docs/benchmarks.md): the strategies that serve its
convolutions, loss.backward()'s time and the peak memory it adds, and an
inference forward's time (inside bwdconv.reuse_weight_transforms on
bwdconv's sides), for aten, bwdconv's rules and bwdconv tuned in an order
drawn at random each round, compared by bench.ratios.
"""

import argparse
import contextlib
import statistics

import torch
from torch import nn

import bwdconv
from bwdconv import _memory, _tune
from bwdconv._overhead import samples_in_rounds
from bwdconv._progress import progress_bar

from . import device as dev
from . import ratios
from .cli import add_tuning_cache_option, tuning_cache
from .decoders import DCGANGenerator, UNet
from .run import PLANNED, TUNED, forcing

DEFAULT_MODELS = ["resnet18", "resnet50", "r3d18", "unet", "dcgan"]


def _models(gpu, scale=1):
    """name -> (model maker, input shape); `scale` divides the image sizes and
    the decoders' widths."""
    batch = 32 if gpu else 4
    size = (224 if gpu else 64) // scale
    clip = tuple(max(d // scale, 2) for d in ((16, 112, 112) if gpu else (4, 32, 32)))
    models = {
        "unet": (lambda: UNet(width=(32 if gpu else 16) // scale),
                 (batch // 4 or 1, 3, size, size)),
        "dcgan": (lambda: DCGANGenerator(latent=100, width=(512 if gpu else 128) // scale,
                                         upsamplings=4),
                  (128 if gpu else 16, 100, 1, 1)),
    }
    try:
        import torchvision
    except ImportError:
        return models  # the decoders need no download
    return {
        "resnet18": (lambda: torchvision.models.resnet18(), (batch, 3, size, size)),
        "resnet50": (lambda: torchvision.models.resnet50(), (batch, 3, size, size)),
        "r3d18": (lambda: torchvision.models.video.r3d_18(), (batch // 4 or 1, 3, *clip)),
        **models,
    }


def loss_of(output):
    """A classifier's cross entropy against class 0; a decoder's mean square."""
    if output.dim() == 2:
        target = torch.zeros(output.shape[0], dtype=torch.long, device=output.device)
        return nn.functional.cross_entropy(output, target)
    return output.float().square().mean()


def backward_ms(model, x, device):
    """One training step's backward, timed alone (forward and loss untimed)."""
    model.zero_grad(set_to_none=True)
    loss = loss_of(model(x))
    return dev.time_ms(lambda: loss.backward(retain_graph=True), device, warmup=0,
                       iterations=1)[0]


def backward_peak_bytes(model, x, device):
    """The peak memory one training step's backward adds (forward and loss outside)."""
    model.zero_grad(set_to_none=True)
    loss = loss_of(model(x))
    return _memory.peak_bytes(lambda: loss.backward(retain_graph=True), device)


def inference_ms(model, x, device, reuse_transforms):
    """One inference forward (torch.inference_mode); with `reuse_transforms`
    inside bwdconv.reuse_weight_transforms, as an inference loop opts in."""
    def forward():
        reuse = bwdconv.reuse_weight_transforms() if reuse_transforms \
            else contextlib.nullcontext()
        with torch.inference_mode(), reuse:
            model(x)
    return dev.time_ms(forward, device, warmup=0, iterations=1)[0]


def measure(name, make, shape, device, dtype, steps):
    torch.manual_seed(0)
    model = make().to(device)
    x = torch.randn(shape, device=device)
    autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32)
    with autocast, _tune.rules_only():
        plan = bwdconv.explain_model(model, x)

    def timed(side, _round):
        with on_side(side), autocast:
            return (backward_ms(model, x, device),
                    inference_ms(model, x, device, reuse_transforms=side != "aten"))

    rounds = samples_in_rounds(list(SIDES), progress_bar(range(steps + 1), desc=name,
                                                         unit="round"), timed)
    # The first round warms up (and tunes).
    times = {side: [b for b, _ in per_round[1:]] for side, per_round in rounds.items()}
    forwards = {side: [f for _, f in per_round[1:]] for side, per_round in rounds.items()}
    peaks = {}
    for side in SIDES:
        with on_side(side), autocast:
            peaks[side] = backward_peak_bytes(model, x, device)
    with autocast:
        tuned_plan = bwdconv.explain_model(model, x)
    compared = ("bwdconv", "tuned")
    return {"convs": len(plan.layers), "served": plan.counts(),
            "tuned_served": tuned_plan.counts(),
            "backward_ms": {side: statistics.median(t) for side, t in times.items()},
            "backward_compared": {side: ratios.compare(times["aten"], times[side])
                                  for side in compared},
            "backward_peak_bytes": peaks,
            "inference_ms": {side: statistics.median(t) for side, t in forwards.items()},
            "inference_compared": {side: ratios.compare(forwards["aten"], forwards[side])
                                   for side in compared}}


SIDES = {"aten": None, "bwdconv": PLANNED, "tuned": TUNED}  # the sides' bench.run forcings


@contextlib.contextmanager
def on_side(side):
    """Without bwdconv (aten), or enabled with the rules alone or autotuning."""
    if SIDES[side] is None:
        yield
        return
    with bwdconv.enabled(), forcing(SIDES[side]):
        yield


def _counts(served):
    return ", ".join(f"{g} " + " ".join(f"{s}:{n}" for s, n in c.items())
                     for g, c in served.items())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--scale", type=int, default=1,
                        help="divide the image sizes and the decoders' widths by this")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                        help="bfloat16 runs under autocast")
    dev.add_device_option(parser)
    dev.add_fixed_heap_option(parser)
    add_tuning_cache_option(parser, "a temporary directory")
    args = parser.parse_args(argv)
    with tuning_cache(args.tuning_cache, None) as decisions:
        return _run(args, decisions)


def _run(args, decisions):
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    meta = dev.describe(device, args.fixed_heap)
    print(dev.header(meta, args.dtype, f"median of {args.steps} backward passes each, aten, "
                     "bwdconv (rules) and tuned in a random order each round") +
          f"\ntuned side's decisions cache: {decisions}")
    models = _models(device.type == "cuda", args.scale)
    for name in args.models:
        if name not in models:
            print(f"{name}: skipped (torchvision is not installed)")
            continue
        make, shape = models[name]
        r = measure(name, make, shape, device, dtype, args.steps)
        backward, inference = r["backward_ms"], r["inference_ms"]
        print(f"{name:9s} input {'x'.join(map(str, shape)):16s} {r['convs']:2d} convs | "
              f"aten {backward['aten']:8.2f} ms  bwdconv {backward['bwdconv']:8.2f} ms "
              f"{backward['aten'] / backward['bwdconv']:.2f}x  tuned {backward['tuned']:8.2f} ms "
              f"{backward['aten'] / backward['tuned']:.2f}x | "
              f"inference aten {inference['aten']:8.2f} ms bwdconv "
              f"{inference['aten'] / inference['bwdconv']:.2f}x tuned "
              f"{inference['aten'] / inference['tuned']:.2f}x | backward peak aten "
              f"{_memory.megabytes(r['backward_peak_bytes']['aten'])} bwdconv "
              f"{_memory.megabytes(r['backward_peak_bytes']['bwdconv'])} tuned "
              f"{_memory.megabytes(r['backward_peak_bytes']['tuned'])} | "
              f"rules: {_counts(r['served'])} | tuned: {_counts(r['tuned_served'])}")
        for what in ("backward", "inference"):
            for side, cell in r[f"{what}_compared"].items():
                print(f"{'':9s} {what}, aten / {side}: {ratios.format_cell(cell)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
