"""A few training steps of a small 1D/2D/3D conv net with bwdconv enabled,
printing which strategy served each layer and checking the gradients against
the same steps with bwdconv disabled.

    python -m bwdconv.demo [--steps N] [--device cpu|cuda]
"""

import argparse
import copy

import torch
from torch import nn

import bwdconv


class SmallConvNet(nn.Module):
    """Strided and unstrided convs in 1, 2 and 3 spatial dims, a grouped conv,
    a dilated conv and a reflect-padded conv."""

    def __init__(self):
        super().__init__()
        self.audio = nn.Sequential(nn.Conv1d(2, 8, 5, stride=2, padding=2), nn.ReLU())
        self.image = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 1, stride=2),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=2, dilation=2, groups=4),
            nn.ReLU(),
            nn.Conv2d(32, 16, 3, padding=1, padding_mode="reflect"),
        )
        self.video = nn.Sequential(nn.Conv3d(1, 4, 3, stride=(1, 2, 2), padding=1), nn.ReLU())

    def forward(self, audio, image, video):
        return self.audio(audio).mean() + self.image(image).mean() + self.video(video).mean()


def example_inputs(device, dtype):
    g = torch.Generator().manual_seed(0)
    shapes = [(4, 2, 64), (4, 3, 32, 32), (2, 1, 8, 16, 16)]
    return [torch.randn(s, generator=g, dtype=dtype).to(device) for s in shapes]


def train(model, inputs, steps):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        optimizer.zero_grad()
        model(*inputs).backward()
        optimizer.step()
    return [p.grad.clone() for p in model.parameters()]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bwdconv.demo",
                                     description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    reference_model = SmallConvNet().to(args.device)
    model = copy.deepcopy(reference_model)
    inputs = example_inputs(args.device, torch.float32)

    print(f"device {args.device}, torch {torch.__version__}")
    print(bwdconv.explain_model(model, *inputs))

    reference = train(reference_model, inputs, args.steps)
    with bwdconv.enabled():
        planned = train(model, inputs, args.steps)
    worst = max((a - b).abs().max().item() for a, b in zip(planned, reference))
    print(f"largest gradient difference to aten after {args.steps} steps: {worst:.3e}")
    if worst > 1e-4:
        raise SystemExit("gradients differ from aten")


if __name__ == "__main__":
    main()
