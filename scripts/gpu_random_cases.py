"""Random convolutions and transposed convolutions through bwdconv, against
float64: the GPU check's randomized step (scripts/gpu_check.sh, step
`random`), and on the CPU the same cases through the kernels' host target.

Every group of cases is one random call: a convolution or a transposed
convolution (1-3 spatial dims, groups, dilation, output_padding, bias), one
dtype (float64, float32, bfloat16, float16) and one layout (NCHW or
channels_last), the groups cycling through every kind x dtype x layout. Its
float64 reference comes from aten on the same rounded operands; aten's own
result in the dtype, under the same TF32 flags, sets the bound
(bwdconv/_accuracy.py). The group then runs once per scope (functional:
F.conv*d / F.conv_transpose*d replaced; aten: aten::convolution_backward
and the transposed aten::convolution planned) and per forcing (the rules,
each strategy forced, swap1x1 with each writer): each run is one case, and
its output (transposed) and gradients dx, dw and db are each held to the
bound. float32 groups on a GPU also cycle the TF32 flags: PyTorch's
defaults, all off, all on.

The shapes are small and include the geometry where the kernels were found
wrong (issue 40): stride-1 dims whose padding is at or past the kernel's
extent, transposed convolutions that crop their output, dilation beside
stride 1; the cases issue 40 lists run first.

    python scripts/gpu_random_cases.py --cases 10000 --seconds 80          # on a GPU
    BWDCONV_CPU_KERNELS=host python scripts/gpu_random_cases.py --device cpu --cases 200
    python scripts/gpu_random_cases.py --small --cudnn off                  # for racecheck

--small runs instead a small case of every strategy and of the rules, for
compute-sanitizer (the GPU check's sanitizer steps): the groups of
SMALL_GROUPS, every one of them (--cases and --seconds do not apply), in the
functional scope unless --scopes says otherwise, their float64 references
computed on the CPU so that the sanitizer sees no more vendor kernels than
the calls' own. --cudnn off (torch.backends.cudnn.enabled = False, for aten
and the strategies' sub-convolutions alike) is for racecheck, which
instruments every kernel: under it cuDNN's large-tile kernels take seconds
each. --mismatches-pass exits 0 on mismatches (still printed): under
compute-sanitizer the step judges the sanitizer's findings, the random step
accuracy.

On the CPU a result outside the bound that aten computed (bwdconv planned or
forced aten for it) and that another run of the same case answers otherwise
is PyTorch's (its CPU bfloat16 channels_last backward reads memory it never
wrote, docs/limitations.md): set aside, listed and counted, at most one case
in a hundred.

Stops at --cases or after --seconds; exits 1 on any mismatch (each printed
with its case and the command that reruns its group), when more results are
set aside than one case in a hundred, when fewer than --cases ran (any
number for --group or --small), or (--require-served) when a forced strategy
served nothing. --json and --report write the counts: cases, mismatches, the
geometry classes, and what each forcing's cases were served by."""

import argparse
import collections
import json
import math
import os
import random
import sys
import time

import torch

from bwdconv import _accuracy as accuracy
from bwdconv import _calls as calls
from bwdconv.bench.device import add_device_option, backend_flags


# A small case of every strategy (--small): 64 phases in one, stride-2 NCHW
# rows in another, kernel = stride, issue 40's stride-1 padding, and
# transposed convolutions; each in float32, float16 and bfloat16, NCHW and
# channels_last, with PyTorch's TF32 defaults and no bias.
SMALL_CASES = [
    calls.conv((2, 8, 9, 11), (8, 8, 1, 1), [2, 2], [0, 0]),
    calls.conv((2, 8, 10, 11), (8, 8, 1, 1), [2, 2], [0, 0]),  # swap1x1 in_place
    calls.conv((2, 8, 9, 11), (8, 4, 3, 3), [2, 2], [1, 1], g=2),
    calls.conv((1, 4, 5, 6, 7), (4, 4, 3, 2, 3), [2, 1, 2], [1, 0, 1], d=[1, 2, 1]),
    calls.conv((1, 8, 9, 10, 11), (8, 8, 5, 5, 5), [4, 4, 4], [2, 1, 0]),  # 64 phases
    # NCHW W of 70 at stride 2, and channels_last rows of 3 channels
    calls.conv((2, 3, 10, 70), (4, 3, 3, 3), [2, 2], [1, 1]),
    # kernel = stride (a U-Net up-convolution's matching convolution):
    # swap1x1's taps, one phase each; grouped, then not
    calls.conv((2, 8, 12, 14), (6, 4, 2, 2), [2, 2], [0, 0], g=2),
    calls.conv((2, 8, 12, 14), (6, 8, 2, 2), [2, 2], [0, 0]),
    # issue 40: a stride-1 dim whose padding passes the kernel's extent
    calls.conv((2, 19, 23, 2), (6, 19, 4, 4), [2, 1], [0, 1]),
    # a U-Net's k2 s2 and a VAE decoder's k3 s2 p1 op1
    calls.transposed((2, 8, 9, 10), (8, 6, 2, 2), [2, 2], [0, 0]),
    calls.transposed((2, 8, 9, 10), (8, 6, 3, 3), [2, 2], [1, 1], op=[1, 1]),
]
# One random call of the step: each of its cases runs it in a scope under a forcing.
Group = collections.namedtuple("Group", "geometry dtype layout tf32 bias")
SMALL_GROUPS = [Group(geometry, dtype, layout, "default", False) for geometry in SMALL_CASES
                for dtype in (torch.float32, torch.float16, torch.bfloat16)
                for layout in calls.LAYOUTS]


def group_plan(seed, index, device, known_cases=True):
    """The Group of index `index`: the known cases first (each NCHW, then
    channels_last), then random ones."""
    rng = random.Random(seed * 1_000_003 + index)
    known = 2 * len(calls.KNOWN_CASES) if known_cases else 0
    if index < known:
        geometry, dtype = calls.KNOWN_CASES[index // 2]
        layout = calls.LAYOUTS[index % 2]
    else:
        kind, dtype, layout = calls.combinations()[(index - known) % len(calls.combinations())]
        geometry = calls.draw(rng, kind, min_dims=2 if layout == "channels_last" else 1)
    tf32 = "default"
    if dtype == torch.float32 and torch.device(device).type == "cuda":
        tf32 = calls.TF32_MODES[(index // len(calls.combinations())) % len(calls.TF32_MODES)]
    return Group(geometry, dtype, layout, tf32, rng.random() < 0.5)


def tf32_flags(mode):
    """The TF32 flags of `mode` (default, on, off) for the body of a `with` block."""
    return backend_flags(tf32=None if mode == "default" else mode == "on")


def operands(group, device, seed):
    """x, w, b (or None), dy of the group's call: drawn in float64, rounded
    to its dtype, on the device."""
    geometry = group.geometry
    x, w, b, dy = calls.rounded_randn(
        torch.Generator().manual_seed(seed),
        [geometry.x_size, geometry.w_size, [geometry.output_channels()], geometry.output_size()],
        group.dtype, device)
    return (calls.laid_out(x, group.layout), w, (b if group.bias else None),
            calls.laid_out(dy, group.layout))


RESULTS = ("out", "dx", "dw", "db")


def run_call(geometry, x, w, b, dy):
    """The output and its gradients dx, dw (and db) (Geometry.__call__)."""
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    leaves = [x, w] if b is None else [x, w, b.detach().requires_grad_()]
    y = geometry(x, w, leaves[2] if b is not None else None)
    grads = torch.autograd.grad(y, leaves, dy)
    return [y.detach(), *grads]


def references(geometry, operands, on_cpu):
    """The call's float64 reference and magnitudes (accuracy.references), on
    the operands' device; computed on the CPU where `on_cpu`."""
    device = operands[0].device
    if on_cpu:
        operands = [None if t is None else t.cpu() for t in operands]
    found = accuracy.references(lambda *tensors: run_call(geometry, *tensors), operands)
    return [[t.to(device) for t in results] for results in found]


def run_with_references(geometry, x, w, b, dy):
    """The call, in the dtype and in float64: aten's runs that may crash
    (calls.pytorch_survives)."""
    run_call(geometry, x, w, b, dy)
    references(geometry, (x, w, b, dy), on_cpu=False)


# How far past what a correct computation may lose aten's own error must be
# for the random step to call aten wrong (it is then no measure for bwdconv).
ATEN_WRONG_FACTOR = 16


def aten_far_off(dtype, limits, reference, magnitude, terms, rounding):
    """A description of the first of aten's results whose error is more than
    ATEN_WRONG_FACTOR times the accuracy rule's bound for an exact aten (its
    propagation bound and one rounding), or None. On the CPU that is
    PyTorch's bfloat16 channels_last backward reading memory it never wrote
    and, by chance, giving the same wrong values on every call."""
    exact = accuracy.bounds(dtype, reference, reference, magnitude, terms, rounding)
    for name, (aten_error, _), (_, correct) in zip(RESULTS, limits, exact):
        if not aten_error <= ATEN_WRONG_FACTOR * correct:  # NaN included
            return f"{name} is wrong (error {aten_error:.3g}, a correct one's bound {correct:.3g})"
    return None


def run(args):
    if args.device == "cpu":
        os.environ.setdefault("BWDCONV_CPU_KERNELS", "host")
    import bwdconv

    device = torch.device(args.device)
    torch.backends.cudnn.enabled = args.cudnn == "on"
    torch.backends.cudnn.benchmark = False  # thousands of new shapes
    bwdconv.set_autotune(False)
    bwdconv.disable()
    if args.corrupt:  # for the tests: a strategy whose gradients are off by 1
        bwdconv._library._C._testing.set_faults(corrupted=args.corrupt)
    plan = calls.forcings(bwdconv)
    if args.only:
        plan = [f for f in plan if f[0] in args.only]
    stats = {
        "device": (torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"),
        "kernels": ("gpu" if device.type == "cuda"
                    else ("host" if bwdconv.kernels_on_host_enabled() else "aten")),
        "torch": torch.__version__, "cudnn": args.cudnn, "seed": args.seed,
        "cases": 0, "groups": 0, "results_checked": 0, "mismatches": [], "errors": [],
        "set_aside": [],
        "by": {by: collections.Counter()
               for by in ("dtype", "layout", "kind", "scope", "forcing", "tf32", "class")},
        "served": {label: {gradient: collections.Counter()
                           for gradient in ("input", "weight", "forward")}
                   for label, _, _ in plan},
        "worst": [],
    }
    started = time.monotonic()
    for index in group_indices(args):
        if stats["cases"] >= args.cases or time.monotonic() - started > args.seconds:
            break
        group = (SMALL_GROUPS[index] if args.small
                 else group_plan(args.seed, index, device, not args.skip_known))
        if args.dtypes and calls.DTYPE_NAMES[group.dtype] not in args.dtypes:
            continue
        run_group(bwdconv, stats, plan, index, group, device, args)
    if device.type == "cuda":
        torch.cuda.synchronize()
    if args.corrupt:
        bwdconv._library._C._testing.set_faults(corrupted=None)
    stats["seconds"] = round(time.monotonic() - started, 1)
    stats["never_served"] = [label for label, strategy, _ in plan if strategy and not any(
        counts.get(strategy) for counts in stats["served"][label].values())]
    return stats


def group_indices(args):
    """--group alone, else every small group (--small), else as many as
    --cases and --seconds allow."""
    if args.group is not None:
        return [args.group]
    return range(len(SMALL_GROUPS) if args.small else 10**9)


class Skipped(Exception):
    """A group whose call aten gives no measure for: the message says why."""


def reference_and_bounds(group, operands, on_cpu, where):
    """(the float64 reference, [(aten's error, the bound)] for each result)
    of the group's call on `operands`; raises Skipped where aten cannot run
    it or, on the CPU, crashes, answers otherwise from call to call or is far
    off (PyTorch CPU defects)."""
    geometry, dtype, device = group.geometry, group.dtype, operands[0].device
    cpu = device.type == "cpu"
    defect = f"on {where} (a PyTorch CPU defect): group skipped"
    if cpu and not calls.pytorch_survives(geometry, run_with_references, geometry, *operands):
        raise Skipped(f"aten crashed {defect}")
    rounding = accuracy.operand_roundoff(dtype, device)
    reference, magnitude = references(geometry, operands, on_cpu)
    try:
        aten = run_call(geometry, *operands)
    except Exception as error:  # aten cannot run this call: nothing to hold bwdconv to
        raise Skipped(f"aten raised on {where}: {error}".splitlines()[0]) from None
    if cpu and calls.changing_results(lambda: run_call(geometry, *operands), aten, calls=4):
        raise Skipped(f"aten's results change from call to call {defect}")
    terms = [geometry.terms()[name] for name in RESULTS[:len(aten)]]
    # a strategy adds a transposed forward's bias to its result (written twice)
    rewritten = [0] if geometry.kind == "transposed" and group.bias else []
    limits = accuracy.bounds(dtype, aten, reference, magnitude, terms, rounding, rewritten)
    wrong = cpu and aten_far_off(dtype, limits, reference, magnitude, terms, rounding)
    if wrong:
        raise Skipped(f"aten's {wrong} {defect}")
    return reference, limits


def run_group(bwdconv, stats, plan, index, group, device, args):
    """Group `index`: what aten sets its results' bounds to
    (reference_and_bounds), then a case per scope and forcing."""
    call = operands(group, device, args.seed * 7919 + index)
    where = (f"{group.geometry} {calls.DTYPE_NAMES[group.dtype]} {group.layout} "
             f"tf32={group.tf32}{' bias' if group.bias else ''} ({rerun_options(args, index)})")
    with tf32_flags(group.tf32):
        try:
            reference, limits = reference_and_bounds(group, call, args.small, where)
        except Skipped as skipped:
            stats["errors"].append(str(skipped))
            return
        stats["groups"] += 1
        for scope in args.scopes:
            with bwdconv.enabled(scope):
                for forcing in plan:
                    if stats["cases"] >= args.cases:
                        return
                    run_case(bwdconv, stats, forcing, scope, group, call, reference, limits,
                             where)


def run_case(bwdconv, stats, forcing, scope, group, operands, reference, limits, where):
    """One case: the group's call in `scope` under `forcing`, each result
    held to its bound, those PyTorch's CPU defects make set aside."""
    label, strategy, writer = forcing
    bwdconv.reset_served()

    def forced_call():
        with bwdconv.force_strategy(strategy, swap1x1_writer=writer):
            return run_call(group.geometry, *operands)
    try:
        ours = forced_call()
        errors = accuracy.errors(ours, reference)
    except Exception as error:
        ours, errors = None, [float("nan")] * len(limits)
        failure = f"raised {type(error).__name__}: {error}".splitlines()[0]
    served = calls.served(bwdconv)
    record(stats, label, scope, group, served)
    names = RESULTS[:len(limits)]
    atens_outside = {index for index, (name, error, (_, limit))
                     in enumerate(zip(names, errors, limits))
                     if not accuracy.within(error, limit) and ours is not None
                     and operands[0].device.type == "cpu" and computed_by_aten(name, served)}
    unstable = calls.changing_results(forced_call, ours, calls=4) if atens_outside else set()
    for index, (name, error, (aten_error, limit)) in enumerate(zip(names, errors, limits)):
        stats["results_checked"] += 1
        case = f"{name} {label} {scope} scope: {where}"
        if index in atens_outside & unstable:
            stats["set_aside"].append(
                f"{case}: aten's, error {error:.3g}, and another answer on another run")
        elif not accuracy.within(error, limit):
            stats["mismatches"].append({
                "case": where, "scope": scope, "forcing": label, "result": name,
                "error": error, "aten_error": aten_error, "bound": limit, "served": served,
                "why": failure if ours is None else "outside the bound"})
        elif error > 0:
            keep_worst(stats, error / limit, case)


def rerun_options(args, index):
    """The options that run group `index` again as this run ran it."""
    flags = (("--small", args.small), ("--skip-known", args.skip_known),
             ("--cudnn off", args.cudnn == "off"))
    return " ".join([f"--seed {args.seed}", *(flag for flag, on in flags if on),
                     f"--group {index}"])


def computed_by_aten(name, served):
    """Whether aten computed result `name` (out, dx, dw, db) in a run that
    served `served` (calls.served): a convolution's forward, a transposed
    one's input gradient (a convolution's forward) and every bias gradient
    are always aten's."""
    gradient = {"out": "forward", "dx": "input", "dw": "weight"}.get(name)
    return gradient is None or set(served.get(gradient, {})) <= {"aten"}


def record(stats, label, scope, group, served):
    stats["cases"] += 1
    geometry = group.geometry
    for by, value in (("dtype", calls.DTYPE_NAMES[group.dtype]), ("layout", group.layout),
                      ("kind", geometry.kind), ("scope", scope), ("forcing", label),
                      ("tf32", group.tf32), *(("class", name) for name in geometry.classes())):
        stats["by"][by][value] += 1
    for gradient, counts in served.items():
        stats["served"][label][gradient].update(counts)


def keep_worst(stats, ratio, case):
    worst = stats["worst"]
    worst.append((ratio, case))
    worst.sort(key=lambda item: -item[0])
    del worst[5:]


def report(stats, target):
    """The markdown summary gpu_check.sh puts in its record."""
    lines = [f"- cases: {stats['cases']} (target {target}) in {stats['groups']} groups, "
             f"{stats['results_checked']} results checked, {stats['seconds']} s, "
             f"kernels: {stats['kernels']}, device: {stats['device']}, cuDNN {stats['cudnn']}, "
             f"seed {stats['seed']}",
             f"- mismatches: {len(stats['mismatches'])}"]
    for m in stats["mismatches"][:40]:
        lines.append(f"  - {m['result']} {m['forcing']} {m['scope']} scope: {m['case']}: "
                     f"error {m['error']:.3g}, bound {m['bound']:.3g} (aten {m['aten_error']:.3g})"
                     f", {m['why']}; served {format_served(m['served'])}")
    if len(stats["mismatches"]) > 40:
        lines.append(f"  - ... {len(stats['mismatches']) - 40} more in the JSON")
    for name, counts in stats["by"].items():
        lines.append(f"- by {name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    set_apart = {"set_aside": "results aten computed and changed from run to run, set aside",
                 "errors": "groups aten could not run, skipped"}
    for key, title in set_apart.items():
        if stats[key]:
            lines.append(f"- {title}: {len(stats[key])}")
            lines += [f"  - {e}" for e in stats[key][:10]]
    lines.append("- closest to the bound (error / bound): " + "; ".join(
        f"{r:.2f} {w}" for r, w in stats["worst"][:3]))
    lines += ["", "| forcing | cases | served input gradients (by strategy) | "
              "served weight gradients | served transposed forwards |", "|---|---|---|---|---|"]
    for label, by in stats["served"].items():
        lines.append(f"| {label} | {stats['by']['forcing'][label]} | "
                     f"{format_counts(by['input'])} | {format_counts(by['weight'])} | "
                     f"{format_counts(by['forward'])} |")
    if stats["never_served"]:
        lines.append("")
        lines.append(f"- forced strategies that served nothing: {', '.join(stats['never_served'])}")
    return "\n".join(lines)


def format_counts(counts):
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or "-"


def format_served(served):
    return "; ".join(f"{g}: {format_counts(c)}" for g, c in served.items() if c) or "nothing"


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_device_option(parser)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=80.0)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--skip-known", action="store_true",
                        help="random groups only, without issue 40's cases first")
    parser.add_argument("--group", type=int, default=None, help="run only this group")
    parser.add_argument("--only", nargs="*", help="only these forcings (labels)")
    parser.add_argument("--dtypes", nargs="*", choices=list(calls.DTYPE_NAMES.values()))
    parser.add_argument("--scopes", nargs="*", choices=list(calls.SCOPES),
                        help="default: both, the functional one for --small")
    parser.add_argument("--small", action="store_true",
                        help="a small case of every strategy instead, for compute-sanitizer")
    parser.add_argument("--cudnn", choices=["on", "off"], default="on",
                        help="off: every convolution runs without cuDNN (racecheck)")
    parser.add_argument("--mismatches-pass", action="store_true",
                        help="exit 0 on mismatches (still printed): under compute-sanitizer")
    parser.add_argument("--require-served", action="store_true",
                        help="fail when a forced strategy served no case")
    parser.add_argument("--corrupt", help=argparse.SUPPRESS)
    parser.add_argument("--json")
    parser.add_argument("--report")
    args = parser.parse_args(argv)
    if args.small:  # every small group, however long the sanitizer takes
        args.cases = args.seconds = math.inf
    args.scopes = args.scopes or (["functional"] if args.small else list(calls.SCOPES))
    return args


def main(argv=None):
    args = parse(argv)
    if os.environ.get("BWDCONV_STEP_SECONDS") and not args.small:
        # gpu_check.sh's limit for the step: stop in time to write the report.
        args.seconds = min(args.seconds, max(1.0, float(os.environ["BWDCONV_STEP_SECONDS"]) - 20))
    stats = run(args)
    text = report(stats, "every small group" if args.small else args.cases)
    print(text)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(stats, f, indent=1, default=str)
    minimum = 0 if args.group is not None or args.small else args.cases
    failed = []
    if stats["mismatches"] and not args.mismatches_pass:
        failed.append(f"{len(stats['mismatches'])} mismatches")
    if len(stats["set_aside"]) > stats["cases"] // 100:
        failed.append(f"{len(stats['set_aside'])} results set aside, more than one case in "
                      "a hundred")
    if stats["cases"] < minimum:
        failed.append(f"{stats['cases']} cases, fewer than {minimum}")
    if args.require_served and stats["never_served"]:
        failed.append(f"never served: {', '.join(stats['never_served'])}")
    print("FAILED: " + "; ".join(failed) if failed else "passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
