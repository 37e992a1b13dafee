"""One held-out step, autotuned, its forward and its backward timed apart, with
torch.nn.functional.conv2d as PyTorch has it, replaced by a plain Python wrapper
of it, by a wrapper that first calls the router (bwdconv._C.functional_call),
and as enable() replaces it: python split-forward-backward.py "conv2d 3x3 s2 f32" 300.
The variants of the README replace the router call in `router` by another call."""
import torch, bwdconv, statistics, time, sys, random, contextlib
from bwdconv.bench import overhead as o
from bwdconv.bench import device as dev
from bwdconv import _tune
from bwdconv._library import _C
dev.fix_heap_thresholds()
torch.manual_seed(0)
case = [c for c in o.HELD_OUT if c[0].startswith(sys.argv[1])][0]
_, xs, ws, stride, padding, dtype, cl = case
x = torch.randn(xs, dtype=dtype, requires_grad=True); w = torch.randn(ws, dtype=dtype, requires_grad=True)
F = torch.nn.functional
orig = F.conv2d
def plain(*args, **kwargs):
    return orig(*args, **kwargs)
def router(*args, **kwargs):
    _C.functional_call(2, args, kwargs)
    return orig(*args, **kwargs)
@contextlib.contextmanager
def mode(m):
    if m == "without":
        yield; return
    if m == "functional":
        with bwdconv.enabled(): yield
        return
    F.conv2d = plain if m == "plain" else router
    try: yield
    finally: F.conv2d = orig
def step():
    x.grad = w.grad = None
    s = time.perf_counter(); out = F.conv2d(x, w, None, stride, padding); m = time.perf_counter(); out.sum().backward(); e = time.perf_counter()
    return m - s, e - m
modes = ["without", "plain", "router", "functional"]
res = {m: ([], []) for m in modes}
rng = random.Random(0)
with o.decisions_of_this_run():
    with _tune.autotuning():
        for m in modes:
            with mode(m): step(); step()
    for r in range(int(sys.argv[2])):
        for m in rng.sample(modes, len(modes)):
            with mode(m):
                step(); f, b = step()
            res[m][0].append(f); res[m][1].append(b)
for m in modes:
    f = statistics.median(res[m][0]); b = statistics.median(res[m][1])
    pf = statistics.median(a / c for a, c in zip(res["without"][0], res[m][0]))
    pb = statistics.median(a / c for a, c in zip(res["without"][1], res[m][1]))
    print(f"{m:10s} forward {f*1e6:8.1f} us (paired {pf:.4f})  backward {b*1e6:8.1f} us (paired {pb:.4f})")
