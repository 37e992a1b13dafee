"""Decoders whose upsampling is transposed convolutions, written here (no
downloads): a U-Net (kernel = stride = 2 up-convolutions, skip connections)
and a DCGAN generator (kernel 4, stride 2, padding 1), for the models bench
and the model tests."""

import torch
from torch import nn


def _double_conv(in_channels, out_channels):
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True),
        nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """U-Net: `depth` stride-2 downsamplings (strided 3x3 convolutions), then
    as many ConvTranspose2d(k=2, s=2) up-convolutions, each followed by the
    skip connection and two 3x3 convolutions; `width` channels at the top."""

    def __init__(self, in_channels=3, classes=2, width=16, depth=3):
        super().__init__()
        widths = [width * 2 ** i for i in range(depth + 1)]
        self.stem = _double_conv(in_channels, widths[0])
        self.down = nn.ModuleList(
            nn.Sequential(nn.Conv2d(widths[i], widths[i + 1], 3, stride=2, padding=1),
                          _double_conv(widths[i + 1], widths[i + 1])) for i in range(depth))
        self.up = nn.ModuleList(nn.ConvTranspose2d(widths[i + 1], widths[i], 2, stride=2)
                                for i in reversed(range(depth)))
        self.merge = nn.ModuleList(_double_conv(2 * widths[i], widths[i])
                                   for i in reversed(range(depth)))
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x):
        skips = [self.stem(x)]
        for down in self.down:
            skips.append(down(skips[-1]))
        x = skips.pop()
        for up, merge in zip(self.up, self.merge):
            x = merge(torch.cat([up(x), skips.pop()], dim=1))
        return self.head(x)


class DCGANGenerator(nn.Module):
    """DCGAN's generator: a latent vector [N, latent, 1, 1] to a 3-channel
    image of 4 * 2**`upsamplings` pixels a side, through ConvTranspose2d
    k4 s1 p0 (to 4x4) and then k4 s2 p1 layers that halve the channels."""

    def __init__(self, latent=32, width=64, upsamplings=3, channels=3):
        super().__init__()
        widths = [width * 2 ** (upsamplings - 1 - i) for i in range(upsamplings)]
        layers = [nn.ConvTranspose2d(latent, widths[0], 4, 1, 0, bias=False),
                  nn.BatchNorm2d(widths[0]), nn.ReLU(True)]
        for i in range(upsamplings - 1):
            layers += [nn.ConvTranspose2d(widths[i], widths[i + 1], 4, 2, 1, bias=False),
                       nn.BatchNorm2d(widths[i + 1]), nn.ReLU(True)]
        layers += [nn.ConvTranspose2d(widths[-1], channels, 4, 2, 1, bias=False), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, z):
        return self.net(z)
