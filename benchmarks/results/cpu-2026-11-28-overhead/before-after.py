"""What enable() adds to a user's calls, measured the same way on any build
of bwdconv: the script uses only torch, torchvision, bwdconv.enabled(scope)
and bwdconv.disable(), which every build since the aten scope has.

    PYTHONPATH=<build>/python python before-after.py [--samples 21] [--calls 200] [--steps 200]

- Tiny: conv2d forward + backward of a 1x2x4x4 input and a 1x1 filter (every
  build plans aten for it), `--calls` calls per sample, the three modes
  (without bwdconv, functional scope, aten scope) in a rotating order per
  sample; the added us per call is the median over samples of
  (mode - without), with the quartiles.
- Steps: one training step (forward, cross-entropy, backward) of ResNet-18
  and MobileNetV2 (torchvision, batch 2, 64x64, float32), the modes and a
  null (without bwdconv again) in a random order per round, each timed step
  after an untimed one in its mode; the paired ratio is the median over
  rounds of without / mode (above 1 is faster), with the quartiles.

glibc's default heap, two threads: as a user runs it.
"""

import argparse
import contextlib
import random
import statistics
import time

import torch
import torchvision

import bwdconv

MODES = ("without", "functional", "aten")


@contextlib.contextmanager
def mode(name):
    if name in ("without", "null"):
        yield
        return
    with bwdconv.enabled(name):
        yield


def quartiles(values):
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return f"{median:+.2f} [{q1:+.2f}, {q3:+.2f}]"


def tiny(samples, calls):
    x = torch.randn(1, 2, 4, 4, requires_grad=True)
    w = torch.randn(4, 2, 1, 1, requires_grad=True)

    def per_call_us():
        started = time.perf_counter()
        for _ in range(calls):
            x.grad = w.grad = None
            torch.nn.functional.conv2d(x, w).sum().backward()
        return (time.perf_counter() - started) / calls * 1e6

    times = {m: [] for m in MODES}
    for m in MODES:
        with mode(m):
            per_call_us()
    for sample in range(samples):
        for m in MODES[sample % 3:] + MODES[:sample % 3]:
            with mode(m):
                times[m].append(per_call_us())
    print(f"tiny conv2d forward + backward: without {statistics.median(times['without']):.2f} us"
          + "".join(f" | {m} {quartiles([a - b for a, b in zip(times[m], times['without'])])}"
                    for m in MODES[1:]))


def steps(name, make, rounds):
    torch.manual_seed(0)
    model = make()
    x = torch.randn(2, 3, 64, 64)
    target = torch.zeros(2, dtype=torch.long)

    def step():
        model.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), target).backward()

    modes = MODES + ("null",)
    times = {m: [] for m in modes}
    order = random.Random(0)
    for index in range(rounds + 2):
        for m in order.sample(modes, len(modes)):
            with mode(m):
                step()
                started = time.perf_counter()
                step()
                elapsed = time.perf_counter() - started
            if index >= 2:
                times[m].append(elapsed)
    cells = []
    for m in modes[1:]:
        ratios = [a / b for a, b in zip(times["without"], times[m])]
        q1, median, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
        cells.append(f"{m} {median:.3f} [{q1:.3f}, {q3:.3f}]")
    print(f"{name} step: without {statistics.median(times['without']) * 1e3:.2f} ms | "
          + " | ".join(cells))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=21)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(2)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"bwdconv from {bwdconv.__file__} | torch {torch.__version__} | load {load}")
    tiny(args.samples, args.calls)
    steps("resnet18", torchvision.models.resnet18, args.steps)
    steps("mobilenet_v2", torchvision.models.mobilenet_v2, args.steps)
    bwdconv.disable()


if __name__ == "__main__":
    main()
