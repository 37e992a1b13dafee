"""PyTorch's own CPU stride-1 convolution forward in each dtype against
float64: the named shapes (each in a child process, as some crash), then
random shapes with size-1 dims, padding and dilation per dimensionality and
dtype. Usage: python probe.py [--random N]"""
import argparse
import random
import subprocess
import sys

import torch

NAMED = [  # input, filter, padding, dilation, groups
    ((1, 2, 1, 9, 1), (128, 1, 2, 1, 2), (1, 0, 1), (1, 1, 1), 2),
    ((1, 3, 1, 5, 4), (4, 3, 2, 2, 2), (1, 1, 0), (1, 1, 1), 1),
    ((1, 1, 1, 1, 5), (2, 1, 2, 2, 4), (2, 1, 3), (2, 2, 2), 1),
    ((1, 45, 2, 1, 2), (12, 15, 2, 4, 4), (2, 3, 2), (2, 2, 1), 3),
]


def error(x, w, padding, dilation, groups, dtype, layout=torch.contiguous_format):
    """Largest error of the dtype's result against float64, over the reference's magnitude."""
    ones, zeros = [1] * len(padding), [0] * len(padding)
    reference = torch.ops.aten.convolution(x.double(), w.double(), None, ones, list(padding),
                                           list(dilation), False, zeros, groups)
    ours = torch.ops.aten.convolution(x.to(dtype).contiguous(memory_format=layout), w.to(dtype),
                                      None, ones, list(padding), list(dilation), False, zeros, groups)
    scale = max(reference.abs().max().item(), 1.0)
    return (ours.double() - reference).abs().max().item() / scale


def named_child(index, dtype):
    x_size, w_size, padding, dilation, groups = NAMED[index]
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(x_size, generator=gen), torch.randn(w_size, generator=gen)
    print(f"{error(x, w, padding, dilation, groups, getattr(torch, dtype)):.3g}")


def named():
    for index, case in enumerate(NAMED):
        for dtype in ("float32", "float16", "bfloat16"):
            runs = []
            for _ in range(3):
                done = subprocess.run([sys.executable, __file__, "--child", str(index), dtype],
                                      capture_output=True, text=True)
                runs.append(done.stdout.strip() if done.returncode == 0
                            else f"crash (exit {done.returncode})")
            print(f"{case} {dtype}: relative error in 3 processes: {', '.join(runs)}")


def random_shapes(count, dims, dtype, seed):
    """(shapes run, shapes off by more than 0.1 of the magnitude); a crash ends the process."""
    rng, ran, wrong = random.Random(seed), 0, 0
    gen = torch.Generator().manual_seed(seed)
    while ran < count:
        groups = rng.choice([1, 1, 2, 3])
        per_group = rng.choice([1, 2, 3, 5, 7, 15, 16, 17])
        size = tuple(rng.choice([1, 1, 2, 3, 5, 9]) for _ in range(dims))
        kernel = tuple(rng.randint(1, 4) for _ in range(dims))
        padding = tuple(rng.randint(0, 3) for _ in range(dims))
        dilation = tuple(rng.randint(1, 2) for _ in range(dims))
        layout = torch.channels_last if dims == 2 and rng.random() < 0.5 else torch.contiguous_format
        x = torch.randn((rng.randint(1, 2), groups * per_group, *size), generator=gen)
        w = torch.randn((groups * rng.randint(1, 6), per_group, *kernel), generator=gen)
        if any(s + 2 * p < d * (k - 1) + 1 for s, p, d, k in zip(size, padding, dilation, kernel)):
            continue
        ran += 1
        wrong += error(x, w, padding, dilation, groups, dtype, layout) > 0.1
    return ran, wrong


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--random", type=int, default=800)
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    if args.child:
        return named_child(int(args.child[0]), args.child[1])
    print(f"torch {torch.__version__}")
    named()
    for dims, dtype in [(3, torch.float32), (3, torch.float16), (2, torch.bfloat16),
                        (1, torch.bfloat16)]:
        ran, wrong = random_shapes(args.random, dims, dtype, seed=dims)
        print(f"random {dims}D {dtype}: {ran} shapes, {wrong} off by more than 0.1 of the magnitude")


main()
