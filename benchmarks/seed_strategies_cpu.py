"""A first CPU measurement: each strategy, forced, against aten on the seed
shapes scaled down (median of several runs, same process). The benchmark
harness (bwdconv.bench) supersedes it.

    python benchmarks/seed_strategies_cpu.py [--scale 4] [--repeat 7]
"""

import argparse
import pathlib
import re
import statistics
import time

import torch

import bwdconv

SEEDS = pathlib.Path(__file__).resolve().parents[1] / ".." / "shared" / "shapes" / "seed_shapes.txt"


def parse(line):
    flags = dict(re.findall(r"-(\w) (\d+)", line.split("#")[0]))
    return {k: int(v) for k, v in flags.items()}


def scaled(f, scale):
    g = f.get("g", 1)
    c = max(g, f["c"] // scale // g * g)
    k = max(g, f["k"] // scale // g * g)
    return dict(n=max(1, f["n"] // scale), c=c, k=k, h=max(f["y"], f["H"] // scale),
                w=max(f["x"], f["W"] // scale), y=f["y"], x=f["x"], p=f["p"], q=f["q"],
                u=f["u"], v=f["v"], g=g, F=f["F"])


def median_ms(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, scale 1/{args.scale}")
    for line in SEEDS.read_text().splitlines():
        if not line.startswith("conv"):
            continue
        s = scaled(parse(line), args.scale)
        x = torch.randn(s["n"], s["c"], s["h"], s["w"])
        w = torch.randn(s["k"], s["c"] // s["g"], s["y"], s["x"])
        stride, padding = [s["u"], s["v"]], [s["p"], s["q"]]
        dy = torch.randn_like(torch.nn.functional.conv2d(x, w, None, stride, padding, 1, s["g"]))
        if s["F"] == 2:
            def run():
                torch.ops.bwdconv.convolution_backward_input(dy, w, list(x.shape), stride, padding, [1, 1], s["g"])
            candidates = ["aten", "swap1x1", "scatter", "phase", "phase_stacked"]
        else:
            def run():
                torch.ops.bwdconv.convolution_backward_weight(dy, x, list(w.shape), stride, padding, [1, 1], s["g"])
            candidates = ["aten", "splitk"]
        plan = bwdconv.explain(x, w, stride, padding, 1, s["g"])
        chosen = plan.input_strategy if s["F"] == 2 else plan.weight_strategy
        results = {}
        for name in candidates:
            try:
                with bwdconv.force_strategy(name):
                    results[name] = median_ms(run, args.repeat)
            except ValueError:
                continue
        aten = results["aten"]
        cells = "  ".join(f"{n} {t:7.2f} ms ({aten / t:4.2f}x)" for n, t in results.items())
        shape = f"n{s['n']} c{s['c']} {s['h']}x{s['w']} k{s['k']} {s['y']}x{s['x']} s{s['u']} g{s['g']} F{s['F']}"
        print(f"{shape:42s} planner: {chosen:13s} {cells}")


if __name__ == "__main__":
    main()
