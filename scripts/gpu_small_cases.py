"""A small case of every strategy on the GPU, for compute-sanitizer: each
forced strategy (swap1x1 with each of its writers) computes both gradients
once, in fp32, fp16 and bf16, NCHW and channels_last (64 phases in one
case, rows the staged walk takes in another, kernel = stride in a third),
and the result is compared with aten; then transposed convolutions' forwards
through each strategy that serves them."""

import torch

import bwdconv


def main():
    cases = [((2, 8, 9, 11), (8, 8, 1, 1), [2, 2], [0, 0], [1, 1], 1),
             ((2, 8, 10, 11), (8, 8, 1, 1), [2, 2], [0, 0], [1, 1], 1),  # swap1x1 in_place
             ((2, 8, 9, 11), (8, 4, 3, 3), [2, 2], [1, 1], [1, 1], 2),
             ((1, 4, 5, 6, 7), (4, 4, 3, 2, 3), [2, 1, 2], [1, 0, 1], [1, 2, 1], 1),
             ((1, 8, 9, 10, 11), (8, 8, 5, 5, 5), [4, 4, 4], [2, 1, 0], [1, 1, 1], 1),
             # rows the staged walk takes: NCHW W of 70 at stride 2, and
             # channels_last 3 channels in packets along W
             ((2, 3, 10, 70), (4, 3, 3, 3), [2, 2], [1, 1], [1, 1], 1),
             # kernel = stride (a transposed convolution's U-Net up-convolution,
             # as its matching convolution): swap1x1's taps, one phase each
             ((2, 8, 12, 14), (6, 4, 2, 2), [2, 2], [0, 0], [1, 1], 2)]
    for case in cases:
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for channels_last in (False, True):
                x = torch.randn(case[0], device="cuda", dtype=dtype)
                w = torch.randn(case[1], device="cuda", dtype=dtype)
                if channels_last:
                    fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
                    x = x.to(memory_format=fmt)
                s, p, d, g = case[2:]
                dy = torch.randn_like(torch.ops.aten.convolution(x, w, None, s, p, d, False,
                                                                 [0] * len(s), g))
                forcings = [(name, None) for name in bwdconv.strategies() if name != "swap1x1"]
                forcings += [("swap1x1", writer) for writer in ("fused", "in_place")]
                for strategy, writer in forcings:
                    try:
                        with bwdconv.force_strategy(strategy, swap1x1_writer=writer):
                            gx, gw = torch.ops.bwdconv.convolution_backward(dy, x, w, s, p, d, g)
                    except ValueError:
                        continue  # the strategy (or writer) cannot serve this shape
                    ex, ew, _ = torch.ops.aten.convolution_backward(
                        dy, x, w, None, s, p, d, False, [0] * len(s), g, [True, True, False])
                    tol = 1e-3 if dtype == torch.float32 else 1e-1
                    torch.testing.assert_close(gx, ex, rtol=tol, atol=tol)
                    torch.testing.assert_close(gw, ew, rtol=tol, atol=tol)
    transposed_forwards()
    torch.cuda.synchronize()
    print("all strategies ran on the GPU")


def transposed_forwards():
    """conv_transpose2d k2 s2 (U-Net) and k3 s2 p1 op1 (a VAE decoder) through
    every strategy that serves its forward, against aten's."""
    for w_size, s, p, op in (((8, 6, 2, 2), 2, 0, 0), ((8, 6, 3, 3), 2, 1, 1)):
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(2, 8, 9, 10, device="cuda", dtype=dtype)
            w = torch.randn(w_size, device="cuda", dtype=dtype)
            expected = torch.nn.functional.conv_transpose2d(x, w, None, s, p, op)
            for strategy in bwdconv.strategies("input"):
                try:
                    with bwdconv.force_strategy(strategy, strict=True):
                        y = torch.ops.bwdconv.conv_transpose(x, w, None, [s, s], [p, p],
                                                             [op, op], 1, [1, 1])
                except ValueError:
                    continue
                tol = 1e-3 if dtype == torch.float32 else 1e-1
                torch.testing.assert_close(y, expected, rtol=tol, atol=tol)


if __name__ == "__main__":
    main()
