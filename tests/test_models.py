"""Real models: training steps of ResNet-18/50 and R3D-18 with bwdconv enabled
and disabled on the CPU, eager and compiled, channels_last, the plans inside
the models, and DistributedDataParallel with gloo."""

import functools
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

import bwdconv
from conftest import free_port

torchvision = pytest.importorskip("torchvision")
# One pytest-xdist worker for the module (test.sh: --dist loadgroup): its
# tests share the models built() once.
pytestmark = pytest.mark.xdist_group("models")

# Gradient tolerances: |ours - aten| <= rtol * |aten| + scale * max |any gradient
# of the model|. float64 differs only by summation order (a few ulps amplified
# through the network); float32 through batch norm and up to ~50 layers.
TOLERANCES = {torch.float64: dict(rtol=1e-7, scale=1e-12),
              torch.float32: dict(rtol=1e-3, scale=1e-5)}

MODELS = {
    "resnet18": (lambda: torchvision.models.resnet18(num_classes=10), (4, 3, 64, 64)),
    "resnet50": (lambda: torchvision.models.resnet50(num_classes=10), (4, 3, 64, 64)),
    "r3d18": (lambda: torchvision.models.video.r3d_18(num_classes=10), (2, 3, 4, 24, 24)),
}


def build(name, dtype, channels_last=False):
    torch.manual_seed(0)
    make, shape = MODELS[name]
    model = make().to(dtype)
    x = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(1))
    if channels_last:
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        model, x = model.to(memory_format=fmt), x.to(memory_format=fmt)
    return model, x


@functools.lru_cache(maxsize=None)
def built(name, dtype, channels_last=False):
    """build()'s model and input, the model's first state and its gradients
    of one training step with aten: built once per process, as several tests
    compare with the same reference (each loads the state before a step).
    Called first in a test, where bwdconv is disabled (restore_bwdconv_state)."""
    model, x = build(name, dtype, channels_last)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    assert not bwdconv.is_enabled()
    reference = training_step_gradients(model, x)
    return model, x, state, reference


def training_step_gradients(model, x, run=None):
    """Parameter gradients of `model` after one step through `run` (default: the
    model itself; a compiled wrapper of it otherwise)."""
    model.zero_grad(set_to_none=True)
    target = torch.arange(x.shape[0]) % 10
    nn.functional.cross_entropy((model if run is None else run)(x), target).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def assert_gradients_close(ours, reference, dtype):
    assert ours.keys() == reference.keys()
    tolerance = TOLERANCES[dtype]
    largest = max(g.abs().max().item() for g in reference.values())
    for name in reference:
        torch.testing.assert_close(ours[name], reference[name], rtol=tolerance["rtol"],
                                   atol=tolerance["scale"] * largest,
                                   msg=lambda m: f"{name}: {m}")


def not_aten(counts):
    """{gradient: {strategy: n}} of the strategies other than aten that computed something."""
    return {g: {s: n for s, n in c.items() if n and s != "aten"} for g, c in counts.items()}


def enabled_vs_disabled(name, dtype, channels_last=False, compile_kwargs=None):
    """Gradients with and without bwdconv; returns what served other than aten,
    which is exactly what explain_model plans."""
    model, x, state, reference = built(name, dtype, channels_last)
    model.load_state_dict(state)
    planned = not_aten(bwdconv.explain_model(model, x).counts())
    model.load_state_dict(state)  # the reference's batch-norm statistics
    run = torch.compile(model, **compile_kwargs) if compile_kwargs is not None else model
    torch._dynamo.reset()
    bwdconv.reset_served()
    with bwdconv.enabled():
        ours = training_step_gradients(model, x, run)
    assert sum(bwdconv.served()["weight"].values()) > 0, "bwdconv served no gradient"
    served = not_aten(bwdconv.served())
    assert served == planned
    assert_gradients_close(ours, reference, dtype)
    return served


@pytest.mark.parametrize("name", ["resnet18", "resnet50", "r3d18"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_training_step_matches_aten(name, dtype):
    # In float32 and float64 the CPU rules plan aten at these sizes (passed
    # through); a strategy computing inside a model:
    # test_resnet50_trains_with_swap1x1_forced.
    enabled_vs_disabled(name, dtype)


@pytest.mark.parametrize("name", ["resnet18", "r3d18"])
def test_channels_last(name):
    enabled_vs_disabled(name, torch.float32, channels_last=True)


@pytest.mark.parametrize("name", ["resnet18", "r3d18"])
@pytest.mark.parametrize("fullgraph", [True, False])
def test_compiled_aot_eager(name, fullgraph):
    enabled_vs_disabled(name, torch.float32,
                        compile_kwargs=dict(backend="aot_eager", fullgraph=fullgraph))


def test_compiled_inductor_resnet18():
    enabled_vs_disabled("resnet18", torch.float32, compile_kwargs=dict(fullgraph=True))


@pytest.mark.parametrize("name", ["resnet50", "r3d18"])
def test_plans_inside_the_model_are_what_explain_says(name):
    model, x, state, _ = built(name, torch.float32)
    model.load_state_dict(state)
    explanation = bwdconv.explain_model(model, x)
    assert len(explanation.layers) == sum(
        isinstance(m, (nn.Conv2d, nn.Conv3d)) for m in model.modules())
    assert explanation.layers[0]["input"] is None  # the image needs no gradient
    bwdconv.reset_served()
    with bwdconv.enabled():
        training_step_gradients(model, x)
    served = {g: {s: n for s, n in c.items() if n} for g, c in bwdconv.served().items()}
    assert served == explanation.counts()
    assert explanation.layers[1]["name"] in str(explanation)


@pytest.mark.parametrize("scope", bwdconv.functional.SCOPES)
def test_resnet50_trains_with_swap1x1_forced(scope):
    """Forcing swap1x1 on ResNet-50: it computes the input gradient of every 1x1
    convolution and nothing else, every other gradient is planned as usual,
    and the gradients are aten's; strict forcing raises at the first 3x3."""
    torch.manual_seed(0)
    model = torchvision.models.resnet50(num_classes=10)
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    reference = training_step_gradients(model, x)
    model.load_state_dict(state)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    one_by_one = sum(m.kernel_size == (1, 1) for m in convs)
    with bwdconv.enabled(scope), bwdconv.force_strategy("swap1x1"):
        explained = bwdconv.explain_model(model, x).counts()
        model.load_state_dict(state)
        bwdconv.reset_served()
        ours = training_step_gradients(model, x)
        served = {g: {s: n for s, n in c.items() if n} for g, c in bwdconv.served().items()}
        model.load_state_dict(state)
        with bwdconv.force_strategy("swap1x1", strict=True), \
                pytest.raises(ValueError, match="strategy swap1x1 cannot serve this shape"):
            training_step_gradients(model, x)
    # The stem's input gradient is never computed: the image needs none.
    assert served == {"input": {"swap1x1": one_by_one, "aten": len(convs) - one_by_one - 1},
                      "weight": {"aten": len(convs)}, "forward": {}}
    assert explained == served
    assert_gradients_close(ours, reference, torch.float32)


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(8, 8, 1, stride=2), nn.ReLU(),
            nn.Conv2d(8, 4, 3, padding=1, groups=4))

    def forward(self, x):
        return self.body(x).mean(dim=(2, 3))


def _train(model, batches, steps):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        optimizer.zero_grad()
        model(batches[step]).square().sum().backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def _ddp_worker(rank, world, port, batches, steps, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        bwdconv.enable()
        torch.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(SmallNet().double())
        shard = [b.chunk(world)[rank] for b in batches]
        # Each rank sums its half; DDP averages, so scale by world to match the full-batch sum.
        params = _train(_Scaled(model, world), shard, steps)
        if rank == 0:
            results.put([p.numpy() for p in params])
    finally:
        dist.destroy_process_group()


class _Scaled(nn.Module):
    def __init__(self, inner, factor):
        super().__init__()
        self.inner, self.factor = inner, factor

    def forward(self, x):
        return self.inner(x) * self.factor ** 0.5


def test_ddp_two_processes_match_one_process():
    steps = 3
    g = torch.Generator().manual_seed(3)
    batches = [torch.randn(4, 3, 12, 12, dtype=torch.float64, generator=g) for _ in range(steps)]
    torch.manual_seed(0)
    expected = _train(SmallNet().double(), batches, steps)
    context = mp.get_context("spawn")
    results = context.Queue()
    mp.start_processes(_ddp_worker, args=(2, free_port(), batches, steps, results), nprocs=2,
                       join=True, start_method="spawn")
    got = results.get(timeout=60)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(torch.from_numpy(a), b, rtol=1e-10, atol=1e-12)
