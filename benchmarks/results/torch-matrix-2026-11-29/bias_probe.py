"""PyTorch's own CPU bfloat16 conv_transpose2d against float64: 600 random
small calls, with and without a bias and output padding, counted wrong
where the error passes 5% of the largest value (at least 1). Prints
{(bias, output padding): [calls, wrong]} for the installed torch."""
import torch, random
import torch.nn.functional as F
g = torch.Generator().manual_seed(0); rng = random.Random(2)
stats = {}
for _ in range(600):
    N, C, O = rng.randint(1, 3), rng.randint(1, 6), rng.randint(1, 6)
    H, W = rng.randint(1, 5), rng.randint(1, 5)
    kh, kw = rng.randint(1, 3), rng.randint(1, 3)
    sh, sw = rng.randint(1, 3), rng.randint(1, 3)
    oph, opw = rng.randint(0, sh - 1), rng.randint(0, sw - 1)
    bias = rng.random() < 0.5
    x = torch.randn(N, C, H, W, generator=g); w = torch.randn(C, O, kh, kw, generator=g); b = torch.randn(O, generator=g)
    a = dict(stride=(sh, sw), output_padding=(oph, opw))
    ref = F.conv_transpose2d(x.double(), w.double(), b.double() if bias else None, **a)
    out = F.conv_transpose2d(x.bfloat16(), w.bfloat16(), b.bfloat16() if bias else None, **a).double()
    key = (bias, (oph, opw) != (0, 0))
    wrong = (out - ref).abs().max().item() > 0.05 * max(1, ref.abs().max().item())
    s = stats.setdefault(key, [0, 0]); s[0] += 1; s[1] += wrong
print(torch.__version__, "(bias, output padding): [calls, wrong]", stats)
