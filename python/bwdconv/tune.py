"""Offline tuning: fills the decisions cache for given shapes, then prints the
decisions.

    python -m bwdconv.tune --suite seeds                      # suites shipped with bwdconv
    python -m bwdconv.tune convbfp16 -n 16 -c 64 -H 56 -W 56 -k 64 -y 1 -x 1 -u 2 -v 2
    python -m bwdconv.tune --model resnet50 --input-size 32x3x224x224 [--dtype bfloat16]
    python -m bwdconv.tune --show | --clear

Options come before the MIOpenDriver lines. A line tunes the gradients its
-F mask asks for (0: both, in one call as a training step makes it). A model
runs one forward and backward with bwdconv enabled, so every convolution's
backward is tuned with the operands and layouts the model really has. The
cache is $BWDCONV_CACHE_DIR/decisions-v1.json (default ~/.cache/bwdconv/).
"""

import argparse
import math
import sys

import torch

import bwdconv

from . import _tune
from .bench.cli import add_layout_option, add_suite_option, cases_from, split_lines
from .bench.device import add_device_option
from .bench.driver import BACKWARD_DATA, BACKWARD_WEIGHT, scale_case
from ._progress import progress_bar
from .bench.run import make_operands


def tune_case(case, device):
    """Runs the backward the case's -F mask asks for, with autotuning on."""
    wants_input = bool(case.directions & BACKWARD_DATA)
    wants_weight = bool(case.directions & BACKWARD_WEIGHT)
    if not (wants_input or wants_weight):
        return
    x, w, dy, (stride, padding, dilation, groups) = make_operands(case, device)
    with _tune.autotuning():
        if wants_input and wants_weight:
            torch.ops.bwdconv.convolution_backward(dy, x, w, stride, padding, dilation, groups)
        elif wants_input:
            torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), stride, padding,
                                                         dilation, groups)
        else:
            torch.ops.bwdconv.convolution_backward_weight(dy, x, list(w.shape), stride, padding,
                                                          dilation, groups)


def tune_model(name, input_size, dtype, device):
    """One forward and backward of a torchvision model with bwdconv enabled
    and autotuning on (bfloat16 and float16 under autocast)."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.get_model(name).to(device)
    x = torch.randn(input_size, device=device)
    autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32)
    with bwdconv.enabled(), _tune.autotuning(), autocast:
        model(x).float().sum().backward()


def tune_model_with_progress(name, input_size, dtype, device):
    """tune_model, with one step of a progress bar per shape it tunes."""
    with progress_bar(desc=f"tune {name}", unit="shape") as bar:
        def starting(key):
            bar.set_postfix_str(key.split(" | ")[6])
            bar.update()

        _tune._state.progress = starting
        try:
            tune_model(name, input_size, dtype, device)
        finally:
            _tune._state.progress = None


def _short(key):
    """The parts of a key that differ between shapes of one device."""
    parts = key.split(" | ")
    return parts[3:]


def decision_rows(entries):
    """One row per (key, gradient) for the decision table."""
    rows = []
    for key, entry in entries.items():
        dtype, layout, weight_layout, geometry, grads = _short(key)
        for gradient, d in entry["gradients"].items():
            excluded = "; ".join(f"{label}: {why}" for label, why in d.get("excluded", {}).items())
            choice = f"{d['choice']}[{d['writer']}]" if d.get("writer") else d["choice"]
            rows.append({
                "shape": geometry.replace("conv input ", "").replace(" weight ", " w ")
                .replace("stride ", "s").replace("padding ", "p").replace("dilation ", "d")
                .replace("groups ", "g"),
                "call": "conv_transpose" if "transposed forward" in grads else "conv",
                "dtype": dtype, "layout": layout.replace("input ", ""),
                "weight layout": weight_layout.replace("weight ", ""),
                "grads": grads.replace("grads ", ""), "gradient": gradient,
                "rules": d.get("rules", "?"), "tuned": choice,
                "speedup": f"{d.get('speedup', 1.0):.2f}x", "noise": f"{d.get('noise', 0):.1%}",
                "measured": entry.get("measured_at", "?"), "excluded": excluded or "-",
            })
    return rows


# Under a table with conv_transpose rows.
TRANSPOSED_NOTE = ("conv_transpose: a transposed convolution, shown as its matching convolution "
                   "(input = the transposed convolution's output, the same weight); its forward "
                   "is that convolution's input gradient")


def table(rows):
    if not rows:
        return "no decisions"
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines.append("  ".join("-" * widths[c] for c in columns))
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in columns) for r in rows]
    if any(r["call"] == "conv_transpose" for r in rows):
        lines.append(TRANSPOSED_NOTE)
    return "\n".join(line.rstrip() for line in lines)


def parser():
    p = argparse.ArgumentParser(
        prog="python -m bwdconv.tune",
        description="Measures every strategy against aten on this device and keeps the "
                    "verified fastest per shape in the decisions cache. Options first, then "
                    "MIOpenDriver lines.")
    add_suite_option(p)
    p.add_argument("--scale", type=int, default=1,
                   help="shrink batch, channels and spatial size of the lines by this factor "
                        "(default 1: decisions are per exact shape)")
    add_layout_option(p)
    p.add_argument("--model", help="a torchvision model name (resnet50, r3d_18, ...)")
    p.add_argument("--input-size", help="the model's input, e.g. 32x3x224x224")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32",
                   help="the model's dtype (lower precisions under autocast)")
    add_device_option(p)
    p.add_argument("--show", action="store_true", help="print every decision in the cache")
    p.add_argument("--clear", action="store_true", help="delete every decision in the cache")
    return p


def _cases(args, line_tokens):
    return [scale_case(c, args.scale) for c in cases_from(args, line_tokens)]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    option_tokens, line_tokens = split_lines(argv)
    p = parser()
    args = p.parse_args(option_tokens)
    if args.clear:
        bwdconv.clear_decisions()
        print(f"cleared {_tune._cache.path()}")
        return 0
    if args.show:
        print(f"{_tune._cache.path()}")
        for device in sorted({k.split(" | ")[0] + " | " + k.split(" | ")[1]
                              for k in bwdconv.decisions()}):
            print(f"\n{device}")
            print(table(decision_rows({k: e for k, e in bwdconv.decisions().items()
                                       if k.startswith(device)})))
        return 0
    cases = _cases(args, line_tokens)
    if not cases and not args.model:
        p.error("give MIOpenDriver lines, --suite or --model")
    if args.model and not args.input_size:
        p.error("--model needs --input-size, e.g. 32x3x224x224")
    device = torch.device(args.device)
    _tune.BUDGET_SECONDS = math.inf  # BWDCONV_AUTOTUNE_BUDGET bounds tuning during training only
    before = set(bwdconv.decisions())
    with progress_bar(total=len(cases), desc="tune", unit="line") as bar:
        for case in cases:
            bar.set_postfix_str(case.label())
            tune_case(case, device)
            bar.update()
    if args.model:
        tune_model_with_progress(args.model, [int(v) for v in args.input_size.split("x")],
                                 getattr(torch, args.dtype), device)
    entries = bwdconv.decisions()
    new = {k: e for k, e in entries.items() if k not in before}
    print(f"\n{len(new)} new decisions ({len(entries)} in {_tune._cache.path()}); "
          f"tuning took {_tune._state.spent:.1f} s")
    print(table(decision_rows(new)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
