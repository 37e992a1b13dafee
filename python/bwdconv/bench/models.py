"""End-to-end backward time of real models with bwdconv enabled and disabled.

    python -m bwdconv.bench.models [--models resnet18 resnet50 r3d18] [--steps 7]

For each model: the strategies that serve its convolutions (explain_model)
and the median time of loss.backward() over several steps, measured
alternately in the same process: aten, bwdconv with the planner's rules, and
bwdconv tuned (autotuning on; the first, untimed step tunes every
convolution, with the decisions cache of BWDCONV_CACHE_DIR). Needs torchvision.
"""

import argparse
import contextlib
import statistics

import torch
from torch import nn

import bwdconv
from bwdconv import _tune
from bwdconv._progress import progress_bar

from . import device as dev


def _models(gpu):
    import torchvision

    batch = 32 if gpu else 4
    size = 224 if gpu else 64
    clip = (16, 112, 112) if gpu else (4, 32, 32)
    return {
        "resnet18": (lambda: torchvision.models.resnet18(), (batch, 3, size, size)),
        "resnet50": (lambda: torchvision.models.resnet50(), (batch, 3, size, size)),
        "r3d18": (lambda: torchvision.models.video.r3d_18(), (batch // 4 or 1, 3, *clip)),
    }


def backward_ms(model, x, device):
    """One training step's backward, timed alone (forward and loss untimed)."""
    model.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x), torch.zeros(x.shape[0], dtype=torch.long,
                                                                device=device))
    return dev.time_ms(lambda: loss.backward(retain_graph=True), device, warmup=0,
                       iterations=1)[0]


def measure(name, make, shape, device, dtype, steps):
    torch.manual_seed(0)
    model = make().to(device)
    x = torch.randn(shape, device=device)
    autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32)
    with autocast, _tune.rules_only():
        plan = bwdconv.explain_model(model, x)
    sides = {"aten": _nothing, "bwdconv": _rules, "tuned": _tuned}
    times = {side: [] for side in sides}
    # The first round warms up (and tunes).
    for step in progress_bar(range(steps + 1), desc=name, unit="round"):
        for side, context in sides.items():
            with context(), autocast:
                t = backward_ms(model, x, device)
            if step:
                times[side].append(t)
    with autocast:
        tuned_plan = bwdconv.explain_model(model, x)
    median = {side: statistics.median(t) for side, t in times.items()}
    return {"model": name, "input": list(shape), "dtype": str(dtype).replace("torch.", ""),
            "convs": len(plan.layers), "served": plan.counts(), "aten_ms": median["aten"],
            "bwdconv_ms": median["bwdconv"], "speedup": median["aten"] / median["bwdconv"],
            "tuned_served": tuned_plan.counts(), "tuned_ms": median["tuned"],
            "tuned_speedup": median["aten"] / median["tuned"]}


@contextlib.contextmanager
def _rules():
    with bwdconv.enabled(), _tune.rules_only():
        yield


@contextlib.contextmanager
def _tuned():
    with bwdconv.enabled(), bwdconv.autotuning():
        yield


@contextlib.contextmanager
def _nothing():
    yield


def _counts(served):
    return ", ".join(f"{g} " + " ".join(f"{s}:{n}" for s, n in c.items())
                     for g, c in served.items())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet18", "resnet50", "r3d18"])
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                        help="bfloat16 runs under autocast")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    try:
        import torchvision  # noqa: F401
    except ImportError:
        print("skipped: torchvision is not installed (the models come from torchvision)")
        return 0
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    meta = dev.describe(device)
    print(f"{meta['device']} | torch {meta['torch']} | {meta['date']} | {args.dtype} | "
          f"median of {args.steps} backward passes each, alternating aten, bwdconv (rules) "
          f"and tuned")
    models = _models(device.type == "cuda")
    for name in args.models:
        make, shape = models[name]
        r = measure(name, make, shape, device, dtype, args.steps)
        print(f"{name:9s} input {'x'.join(map(str, shape)):16s} {r['convs']:2d} convs | "
              f"aten {r['aten_ms']:8.2f} ms  bwdconv {r['bwdconv_ms']:8.2f} ms "
              f"{r['speedup']:.2f}x  tuned {r['tuned_ms']:8.2f} ms {r['tuned_speedup']:.2f}x | "
              f"rules: {_counts(r['served'])} | tuned: {_counts(r['tuned_served'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
