"""explain_model says what a step serves: random small models of 1-3
convolutions and transposed convolutions (1-3 spatial dims, groups, bias,
frozen first layers, inputs with and without a gradient, channels_last
inputs and weights, bfloat16 autocast), tuned with a timer that ranks the
candidates at random, then explained and stepped with autotuning off, in
either scope, in training and under no_grad: the table's counts() equal
served() after one step."""

import os
import random

import pytest
import torch
from torch import nn

import bwdconv
from bwdconv import _tune

SEED = int(os.environ.get("BWDCONV_TEST_SEED", "20261206"))
MODELS = 24
CONVOLUTIONS = {1: (nn.Conv1d, nn.ConvTranspose1d), 2: (nn.Conv2d, nn.ConvTranspose2d),
                3: (nn.Conv3d, nn.ConvTranspose3d)}
CHANNELS_LAST = {2: torch.channels_last, 3: torch.channels_last_3d}


@pytest.fixture(autouse=True)
def tuning(fresh_tuning):
    """conftest's fresh_tuning: an empty decisions cache, timers put back."""


def random_timer(rng):
    """Each candidate label's time, drawn once per label from three values,
    so that ties and every ranking occur."""
    times = {}

    def timed(gradient, label):
        return times.setdefault(label, rng.choice([1e-3, 2e-3, 3e-3]))
    return timed


def random_model(rng):
    """(model, input, autocast on): a stack whose layers take the previous
    one's channels."""
    dims = rng.choice([1, 2, 3])
    channels = rng.choice([2, 4])
    layers = []
    for _ in range(rng.randint(1, 3)):
        kernel, stride = rng.choice([(1, 2), (2, 2), (3, 2), (3, 1), (4, 2)])
        out = rng.choice([2, 4, 8])
        groups = rng.choice([1, 1, 2])
        bias = rng.random() < 0.5
        convolution, transposed = CONVOLUTIONS[dims]
        layers.append(transposed(channels, out, kernel, stride=stride, groups=groups, bias=bias)
                      if rng.random() < 0.4 else
                      convolution(channels, out, kernel, stride=stride, padding=kernel // 2,
                                  groups=groups, bias=bias))
        channels = out
    model = nn.Sequential(*layers)
    x = torch.randn(2, layers[0].in_channels, *[rng.randint(5, 9) for _ in range(dims)])
    if dims > 1 and rng.random() < 0.3:
        x = x.to(memory_format=CHANNELS_LAST[dims])
    if dims > 1 and rng.random() < 0.3:
        model.to(memory_format=CHANNELS_LAST[dims])
    x.requires_grad_(rng.random() < 0.3)
    if len(layers) > 1 and rng.random() < 0.3:
        layers[0].requires_grad_(False)
    return model, x, rng.random() < 0.3


def step(model, x, autocast, training):
    """A training step's forward and backward, or an inference forward."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast), \
            torch.set_grad_enabled(training):
        out = model(x).float().square().mean()
        if training:
            out.backward()


@pytest.mark.parametrize("training", [True, False], ids=["training", "no_grad"])
@pytest.mark.parametrize("scope", ["functional", "aten"])
def test_explain_model_counts_what_a_tuned_step_serves(scope, training):
    rng = random.Random(SEED)
    for case in range(MODELS):
        model, x, autocast = random_model(rng)
        _tune._state.timer = random_timer(rng)
        with bwdconv.enabled(scope), bwdconv.autotuning():
            step(model, x, autocast, training)
        bwdconv.set_autotune(False)
        with bwdconv.enabled(scope), torch.set_grad_enabled(training), \
                torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            explained = bwdconv.explain_model(model, x).counts()
        bwdconv.reset_served()
        with bwdconv.enabled(scope):
            step(model, x, autocast, training)
        served = {g: {s: n for s, n in c.items() if n} for g, c in bwdconv.served().items()}
        assert served == explained, (f"BWDCONV_TEST_SEED={SEED} case {case}", model,
                                     tuple(x.shape), x.requires_grad, autocast)
