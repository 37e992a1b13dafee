"""enable() under torch.func transforms, torch.export and torch.jit: results
are PyTorch's, and exported or traced graphs hold aten's convolutions."""

import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, vjp, vmap

import bwdconv

CONVS = {
    1: lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2),
    2: lambda: nn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2),
    3: lambda: nn.Conv3d(4, 6, 2, stride=(2, 1, 2), padding=1, dilation=(1, 2, 1), groups=2),
}
SPATIAL = {1: (11,), 2: (9, 8), 3: (4, 5, 4)}


def small_model(dims):
    torch.manual_seed(dims)
    return nn.Sequential(CONVS[dims](), nn.Tanh(), nn.Flatten(), nn.LazyLinear(3)).double()


def per_sample_setup(dims):
    model = small_model(dims)
    x = torch.randn(4, 4, *SPATIAL[dims], dtype=torch.double)
    model(x)  # materializes the lazy layer
    t = torch.tensor([0, 2, 1, 0])
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, xi, ti):
        return F.cross_entropy(functional_call(model, p, (xi[None],)), ti[None])

    return params, x, t, loss


def assert_trees_close(ours, theirs):
    assert ours.keys() == theirs.keys()
    for k in theirs:
        torch.testing.assert_close(ours[k], theirs[k], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("enabled", [False, True])
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_per_sample_gradients_equal_a_loop_over_samples(dims, enabled):
    params, x, t, loss = per_sample_setup(dims)
    with bwdconv.enabled() if enabled else torch.enable_grad():
        batched = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, t)
    for i in range(x.shape[0]):
        one = grad(loss)(params, x[i], t[i])
        assert_trees_close({k: v[i] for k, v in batched.items()}, one)


def test_issue_snippet_returns_pytorchs_per_sample_gradients():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                          nn.Conv2d(8, 4, 1, stride=2), nn.Flatten(), nn.Linear(64, 2)).double()
    x, t = torch.randn(5, 3, 16, 16, dtype=torch.double), torch.randint(0, 2, (5,))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, xi, ti):
        return F.cross_entropy(functional_call(model, p, (xi[None],)), ti[None])

    expected = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, t)
    with bwdconv.enabled():
        ours = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, t)
    assert_trees_close(ours, expected)


def conv_function(dims):
    model = small_model(dims)
    x = torch.randn(2, 4, *SPATIAL[dims], dtype=torch.double)
    model(x)
    return (lambda inp: model(inp).square().sum()), x


@pytest.mark.parametrize("transform", ["jacrev", "jacfwd", "hessian", "vjp"])
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_transforms_of_a_conv_model_equal_pytorchs(dims, transform):
    f, x = conv_function(dims)
    x = x[:1]

    def run():
        if transform == "vjp":
            out, pull = vjp(f, x)
            return out, pull(torch.ones_like(out))[0]
        return {"jacrev": jacrev, "jacfwd": jacfwd, "hessian": hessian}[transform](f)(x)

    expected = run()
    bwdconv.reset_served()
    with bwdconv.enabled():
        ours = run()
    for a, b in zip(ours if isinstance(ours, tuple) else (ours,),
                    expected if isinstance(expected, tuple) else (expected,), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.b = nn.Conv1d(8, 4, 1)
        self.c = nn.Conv3d(1, 2, 3, padding="same")

    def forward(self, x):
        y = torch.relu(self.a(x)).flatten(2)
        z = self.b(y)
        return self.c(z[:, None, :, :, None].expand(-1, -1, -1, -1, 3)).sum((1, 4))


def call_targets(graph):
    return [str(n.target) for n in graph.nodes if n.op == "call_function"]


def exported(model, x):
    return torch.export.export(model, (x,))


def test_export_records_aten_convolutions(tmp_path):
    model, x = Net().eval(), torch.randn(2, 3, 8, 8)
    plain = call_targets(exported(model, x).graph)
    with bwdconv.enabled():
        program = exported(model, x)
    targets = call_targets(program.graph)
    assert targets == plain
    assert not [t for t in targets if "bwdconv" in t]
    assert sum(t.startswith("aten.conv") for t in targets) == 3
    path = tmp_path / "net.pt2"
    torch.export.save(program, str(path))
    torch.save((x, model(x)), tmp_path / "io.pt")
    # A process that never imports bwdconv loads and runs it.
    code = ("import sys, torch; program = torch.export.load(sys.argv[1]); "
            "x, y = torch.load(sys.argv[2]); "
            "torch.testing.assert_close(program.module()(x), y); "
            "assert 'bwdconv' not in sys.modules; print('ran')")
    run = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "io.pt")],
                         capture_output=True, text=True, cwd=tmp_path,
                         env={"PATH": "/usr/bin:/bin"})
    assert run.returncode == 0 and run.stdout.strip() == "ran", run.stderr


def test_export_keeps_bwdconv_ops_when_asked():
    model, x = Net(), torch.randn(2, 3, 8, 8)
    bwdconv.enable(export_ops=True)
    targets = call_targets(exported(model, x).graph)
    assert sum(t == "bwdconv.convolution.default" for t in targets) == 3
    bwdconv.disable()
    bwdconv.enable()
    assert not [t for t in call_targets(exported(model, x).graph) if "bwdconv" in t]


def test_jit_trace_and_script_record_aten_convolutions():
    model, x = Net(), torch.randn(2, 3, 8, 8)
    with bwdconv.enabled():
        traced = torch.jit.trace(model, (x,))
        scripted = torch.jit.script(model)
    for module in (traced, scripted):
        kinds = {n.kind() for n in module.inlined_graph.nodes()}
        assert not [k for k in kinds if k.startswith("bwdconv")], kinds
        assert {"aten::_convolution", "aten::conv2d"} & kinds, kinds
        torch.testing.assert_close(module(x), model(x))
    bwdconv.enable(export_ops=True)
    # (check_trace re-traces without gradients, where nothing is planned)
    kinds = {n.kind() for n in torch.jit.trace(model, (x,), check_trace=False).inlined_graph.nodes()}
    assert "bwdconv::convolution" in kinds


def test_compiled_training_keeps_bwdconv_backward():
    model, x = Net(), torch.randn(2, 3, 8, 8)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    bwdconv.reset_served()
    with bwdconv.enabled():
        compiled(x).sum().backward()
    served = bwdconv.served()
    assert sum(served["weight"].values()) == 3 and sum(served["input"].values()) == 2
