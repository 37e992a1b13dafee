import torch, time, statistics, sys
import torch.nn.functional as F
import bwdconv
from bwdconv.bench import overhead
torch.manual_seed(0)
# (input size, weight size, stride, padding) of four bfloat16 1x1 lines: each step without bwdconv,
# in the functional scope and in the aten scope (bench.overhead.step_ratios, 25 rounds), once
# with .sum().backward() and once with a fixed random grad_output.
cases = [((8,64,19,31),(128,64,1,1),4,(1,0)), ((8,64,8,55),(256,64,1,1),4,(0,0)), ((16,16,8,56),(32,16,1,1),2,(0,0)), ((8,32,57,25),(256,32,1,1),4,(0,0))]
for xs_, ws_, s, p in cases:
    x = torch.randn(xs_, dtype=torch.bfloat16, requires_grad=True); w = torch.randn(ws_, dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn_like(F.conv2d(x, w, None, s, p))
    def sum_step():
        x.grad = w.grad = None
        F.conv2d(x, w, None, s, p).sum().backward()
    def dy_step():
        x.grad = w.grad = None
        F.conv2d(x, w, None, s, p).backward(dy)
    for name, st in (("sum", sum_step), ("dy", dy_step)):
        ms, cells = overhead.step_ratios(st, torch.device("cpu"), 25)
        print(xs_, ws_, s, p, name, ms, "fn", cells["functional"]["ratio"], cells["functional"]["ratio_ci90"], "aten", cells["aten"]["ratio"], "null", cells["null"]["ratio"], flush=True)
