"""A held-out step timed with each mode held for blocks of 10 steps (no switch
between timed steps), against steps without bwdconv right after a switch into and
out of the scope: python held-modes.py "conv2d 3x3 s2 f32" functional"""
import torch, bwdconv, statistics, time, sys, gc
from bwdconv.bench import overhead as o
from bwdconv.bench import device as dev
from bwdconv import _tune
dev.fix_heap_thresholds() if hasattr(dev, "fix_heap_thresholds") else None
torch.manual_seed(0)
case = [c for c in o.HELD_OUT if c[0].startswith(sys.argv[1])][0]
scope = sys.argv[2]
step = o._held_out_step(case, torch.device("cpu"))
def t():
    s = time.perf_counter(); step(); return (time.perf_counter() - s) * 1e3
with o.decisions_of_this_run():
    with _tune.autotuning():
        with bwdconv.enabled(scope):
            for _ in range(3): step()
    res = {"without": [], scope: [], "toggled-without": []}
    for block in range(40):
        for m in ("without", scope, "toggled-without")[::(1 if block % 2 else -1)]:
            if m == scope:
                with bwdconv.enabled(scope):
                    step(); res[m] += [t() for _ in range(10)]
            elif m == "toggled-without":
                with bwdconv.enabled(scope):
                    pass
                step(); res[m] += [t() for _ in range(10)]
            else:
                step(); res[m] += [t() for _ in range(10)]
base = statistics.median(res["without"])
for m, v in res.items():
    print(f"{m:16s} median {statistics.median(v):.3f} ms  ratio {base / statistics.median(v):.4f}")
