"""One rule for every setting (bwdconv._settings): a bad value is an error
that names the variable or argument and its allowed values, raised where it is
given; the doctor reports bad variables instead of failing on them."""

import json
import os
import subprocess
import sys

import pytest
import torch

import bwdconv

BAD_VARIABLES = {
    "BWDCONV_STRATEGY": ("bogus", "BWDCONV_STRATEGY='bogus': expected one of aten, swap1x1"),
    "BWDCONV_STRATEGY_STRICT": ("maybe", "BWDCONV_STRATEGY_STRICT='maybe': expected one of 1"),
    "BWDCONV_SWAP1X1_WRITER": ("best", "BWDCONV_SWAP1X1_WRITER='best': expected one of fused"),
    "BWDCONV_AUTOTUNE": ("sometimes", "BWDCONV_AUTOTUNE='sometimes': expected one of 1, true"),
    "BWDCONV_AUTOTUNE_BUDGET": ("-3", "BWDCONV_AUTOTUNE_BUDGET='-3': expected a number of "
                                      "seconds above 0"),
    "BWDCONV_AUTOTUNE_KEY_SECONDS": ("soon", "BWDCONV_AUTOTUNE_KEY_SECONDS='soon': expected"),
    "BWDCONV_MEMORY_BUDGET": ("lots", "BWDCONV_MEMORY_BUDGET='lots': expected 'gradient'"),
    "BWDCONV_CPU_KERNELS": ("gpu", "BWDCONV_CPU_KERNELS='gpu': expected one of aten, host"),
}


def run(code_or_args, **variables):
    args = ["-c", code_or_args] if isinstance(code_or_args, str) else code_or_args
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("BWDCONV_") or k == "BWDCONV_CACHE_DIR"}
    return subprocess.run([sys.executable, *args], env={**env, **variables},
                          capture_output=True, text=True, cwd=os.path.dirname(__file__))


def test_each_bad_variable_fails_the_import_naming_it():
    """One process with every bad variable at once: the import's one error
    names each of them with its allowed values."""
    result = run("import bwdconv", **{name: value for name, (value, _) in BAD_VARIABLES.items()})
    assert result.returncode != 0
    assert "ValueError: bwdconv: bad settings in the environment" in result.stderr
    for name, (_, message) in BAD_VARIABLES.items():
        assert message in result.stderr, name


def test_the_doctor_reports_bad_variables_instead_of_failing():
    variables = {"BWDCONV_STRATEGY": "bogus", "BWDCONV_AUTOTUNE": "maybe"}
    text = run(["-m", "bwdconv"], **variables)
    assert text.returncode == 1, text.stderr
    assert "bad settings" in text.stdout
    assert BAD_VARIABLES["BWDCONV_STRATEGY"][1] in text.stdout
    facts = json.loads(run(["-m", "bwdconv", "--json"], **variables).stdout)
    assert len(facts["bad_settings"]) == 2
    clean = run(["-m", "bwdconv", "--json"])
    assert clean.returncode == 0 and json.loads(clean.stdout)["bad_settings"] == []


@pytest.mark.parametrize("word, on", [("1", True), ("true", True), ("Yes", True), ("ON", True),
                                      ("0", False), ("false", False), ("no", False),
                                      ("off", False)])
def test_on_off_variables_take_the_same_words(word, on):
    code = ("import bwdconv; print(bwdconv.is_autotuning(), "
            "bwdconv._explain._C.forcing()[2])")
    result = run(code, BWDCONV_AUTOTUNE=word, BWDCONV_STRATEGY_STRICT=word)
    assert result.stdout.split() == [str(on), str(on)], result.stderr


@pytest.mark.parametrize("call, error, message", [
    (lambda: bwdconv.enable(autotune="yes"), TypeError,
     r"enable\(\): autotune must be True, False or None, not 'yes'"),
    (lambda: bwdconv.enable(export_ops=1), TypeError, r"enable\(\): export_ops must be True"),
    (lambda: bwdconv.enable("everything"), ValueError, "unknown scope 'everything'; expected one "
                                                       "of functional, aten"),
    (lambda: bwdconv.enable(memory_budget="lots"), ValueError,
     "memory_budget='lots': expected 'gradient'"),
    (lambda: bwdconv.set_autotune("on"), TypeError, r"set_autotune\(\): on must be True or False"),
    (lambda: bwdconv.force_strategy("nope"), ValueError,
     r"force_strategy\(\): name='nope': expected one of aten, swap1x1"),
    (lambda: bwdconv.force_strategy("swap1x1", swap1x1_writer="x"), ValueError,
     r"force_strategy\(\): swap1x1_writer='x': expected one of fused"),
    (lambda: bwdconv.force_strategy("phase", strict="yes"), TypeError,
     r"force_strategy\(\): strict must be True or False"),
])
def test_a_bad_argument_raises_where_it_is_given(call, error, message):
    """Raised by the call itself, not when a `with` block is entered, and
    leaving bwdconv as it was."""
    before = (bwdconv.is_enabled(), bwdconv.is_autotuning(), bwdconv.forced_strategy())
    with pytest.raises(error, match=message):
        call()
    assert (bwdconv.is_enabled(), bwdconv.is_autotuning(), bwdconv.forced_strategy()) == before


@pytest.mark.parametrize("scope", ["functional", "aten"])
def test_strict_forcing_raises_on_a_transposed_forward_it_cannot_serve(scope):
    """swap1x1 serves neither gradient of a k3 s2 convolution; strict forcing
    raises on the transposed convolution's forward, which is that input
    gradient, instead of planning aten."""
    x, w = torch.randn(1, 8, 5, 5), torch.randn(8, 4, 3, 3)
    bwdconv.enable(scope)
    with bwdconv.force_strategy("swap1x1", strict=True):
        with pytest.raises(ValueError, match="strategy swap1x1 cannot serve this shape"):
            torch.nn.functional.conv_transpose2d(x, w, stride=2)
        # PyTorch's own error still comes first for an invalid call.
        with pytest.raises(RuntimeError) as theirs:
            torch.nn.functional.conv_transpose2d(x, torch.randn(4, 4, 3, 3), stride=2)
    with pytest.raises(RuntimeError) as plain:
        bwdconv.disable()
        torch.nn.functional.conv_transpose2d(x, torch.randn(4, 4, 3, 3), stride=2)
    assert str(theirs.value) == str(plain.value)
    with bwdconv.force_strategy("swap1x1"):  # not strict: planned around
        bwdconv.enable(scope)
        torch.testing.assert_close(torch.nn.functional.conv_transpose2d(x, w, stride=2),
                                   torch.ops.aten.conv_transpose2d(x, w, stride=[2, 2]))
