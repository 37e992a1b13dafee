"""Decoders whose upsampling is transposed convolutions (bwdconv.bench.decoders):
a U-Net and a DCGAN generator train and infer with bwdconv enabled in both
scopes as without it, eager, compiled and under DDP, and the models bench
times them."""

import os
import re

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

import bwdconv
from bwdconv.bench import models as models_bench
from bwdconv.bench.decoders import DCGANGenerator, UNet
from conftest import free_port

DECODERS = {
    "unet": (lambda: UNet(width=4, depth=2), (2, 3, 16, 16)),
    "dcgan": (lambda: DCGANGenerator(latent=8, width=16, upsamplings=3), (2, 8, 1, 1)),
}
# Strategies forced on the transposed forwards: every one that serves a
# transposed forward (kernel = stride serves them all), and splitk's weights.
FORCED = [None] + [s for s in bwdconv.strategies() if s != "aten"]


def build(name):
    torch.manual_seed(0)
    make, shape = DECODERS[name]
    x = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    return make().double(), x


def step(model, x, run=None):
    """Output and parameter gradients of one training step (batch-norm
    statistics restored after it, so that every step sees the same ones)."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    model.zero_grad(set_to_none=True)
    y = (model if run is None else run)(x)
    y.square().mean().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.load_state_dict(state)
    return y.detach(), grads


def planned_strategies(counts):
    """{gradient: {strategy: n}} of the strategies other than aten, a
    transposed layer's forward counted as the input gradient it is."""
    merged = {"input": dict(counts["input"]), "weight": dict(counts["weight"])}
    for strategy, n in counts.get("forward", {}).items():
        merged["input"][strategy] = merged["input"].get(strategy, 0) + n
    return {g: {s: n for s, n in c.items() if n and s != "aten"} for g, c in merged.items()}


def assert_same(ours, reference):
    torch.testing.assert_close(ours[0], reference[0], rtol=1e-9, atol=1e-12)
    assert ours[1].keys() == reference[1].keys()
    for name in reference[1]:
        torch.testing.assert_close(ours[1][name], reference[1][name], rtol=1e-9, atol=1e-12,
                                   msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize("scope", ["functional", "aten"])
@pytest.mark.parametrize("strategy", FORCED)
def test_training_step_gives_atens_float64_gradients(name, scope, strategy):
    model, x = build(name)
    reference = step(model, x)
    with bwdconv.force_strategy(strategy):
        planned = planned_strategies(bwdconv.explain_model(model, x).counts())
    bwdconv.reset_served()
    with bwdconv.enabled(scope), bwdconv.force_strategy(strategy):
        ours = step(model, x)
    assert_same(ours, reference)
    assert planned_strategies(bwdconv.served()) == planned  # what the plans said computed
    if strategy == "swap1x1" and name == "unet":
        assert planned["input"] == {"swap1x1": 3}  # both k2 s2 up-convolutions, the 1x1 head


@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize("scope", ["functional", "aten"])
def test_inference_forward_is_planned_and_atens(name, scope):
    model, x = build(name)
    model.eval()
    with torch.inference_mode():
        expected = model(x)
    bwdconv.reset_served()
    with bwdconv.enabled(scope), bwdconv.force_strategy("phase"), torch.inference_mode():
        got = model(x)
    assert bwdconv.served()["forward"]["phase"] > 0
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", DECODERS)
def test_compiled_training_step(name):
    model, x = build(name)
    reference = step(model, x)
    torch._dynamo.reset()
    with bwdconv.enabled(), bwdconv.force_strategy("swap1x1" if name == "unet" else "phase"):
        ours = step(model, x, torch.compile(model, fullgraph=True, backend="aot_eager"))
    assert_same(ours, reference)


def test_explain_model_lists_the_transposed_layers():
    model, x = build("unet")
    explanation = bwdconv.explain_model(model, x)
    transposed = [layer for layer in explanation.layers if layer["transposed"]]
    assert len(transposed) == 2 and all(layer["name"].startswith("up.") for layer in transposed)


def _train(run, batches, parameters):
    parameters = list(parameters)
    optimizer = torch.optim.SGD(parameters, lr=0.01)
    for batch in batches:
        optimizer.zero_grad()
        run(batch).square().sum().backward()
        optimizer.step()
    return [p.detach().clone() for p in parameters]


def _ddp_worker(rank, world, port, batches, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        bwdconv.enable()
        torch.manual_seed(0)
        inner = DCGANGenerator(latent=8, width=16, upsamplings=3).double()
        # No batch norm across ranks: eval-mode statistics keep the ranks exact.
        inner.eval()
        model = nn.parallel.DistributedDataParallel(inner)
        shard = [b.chunk(world)[rank] for b in batches]
        # Each rank sums its half; DDP averages: scaled by world, the full sum's.
        params = _train(lambda z: model(z) * world ** 0.5, shard, model.parameters())
        if rank == 0:
            results.put([p.numpy() for p in params])
    finally:
        dist.destroy_process_group()


def test_ddp_two_processes_train_the_generator_as_one():
    g = torch.Generator().manual_seed(3)
    batches = [torch.randn(4, 8, 1, 1, dtype=torch.float64, generator=g) for _ in range(2)]
    torch.manual_seed(0)
    reference = DCGANGenerator(latent=8, width=16, upsamplings=3).double()
    reference.eval()
    expected = _train(reference, batches, reference.parameters())
    results = mp.get_context("spawn").Queue()
    workers = mp.start_processes(_ddp_worker, args=(2, free_port(), batches, results),
                                 nprocs=2, join=False, start_method="spawn")
    got = results.get(timeout=120)  # before joining: rank 0 exits once its put is read
    while not workers.join():
        pass
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(torch.from_numpy(a), b, rtol=1e-9, atol=1e-12)


def test_the_models_bench_times_the_decoders(capsys, fresh_tuning):
    assert models_bench.main(["--models", "unet", "dcgan", "--steps", "1", "--scale", "4",
                              "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    for name in ("unet", "dcgan"):
        line = next(line for line in out.splitlines() if line.startswith(name))
        assert "inference aten" in line and "tuned" in line, line
        assert re.search(r"backward peak aten [\d.]+ MB bwdconv [\d.]+ MB tuned [\d.]+ MB", line)
    for side in ("bwdconv", "tuned"):  # two sides compared with aten, intervals included
        for what in ("backward", "inference"):
            assert len(re.findall(rf"{what}, aten / {side}: [\d.]+ \[[\d.]+-[\d.]+\] paired "
                                  rf"[\d.]+ \[[\d.]+-[\d.]+\]", out)) == 2, out
