"""The accuracy rule: what a gradient (or a transposed forward) bwdconv
computes is held to, wherever it is checked (the autotuner's verification,
the bench's --check, the tests, the GPU check), against a float64 reference
computed from the same rounded operands:

    error(bwdconv) <= max(FACTOR * error(aten), propagation bound)
                      + one rounding of the result's dtype at the largest value

- error(x) is the largest absolute difference from the float64 reference;
  error(aten) is aten's own error in the same dtype, under the same TF32
  flags (the call bwdconv replaces).
- The propagation bound is what any correct summation order may lose: each of
  the K products accumulated in the accumulator's precision (float64 for
  float64, float32 for every other dtype), gamma_K = K u / (1 - K u), times the
  float64 result of the same computation on the operands' absolute values.
  Where TF32 is on (a float32 call on a GPU with
  torch.backends.cudnn.allow_tf32 or a float32 matmul precision below
  "highest"), each operand may also be rounded to TF32 first: 2 * 2^-11 more
  per product (the TF32 bound).
- A result written once more in its own dtype (a transposed forward's bias
  added to a strategy's result) may carry one more rounding, at its
  magnitude, which bounds the result before the bias: the one rounding at
  the largest value, with twice aten's error, did not cover both (random seed
  625: conv_transpose1d bfloat16 with a bias, error 0.0603, bound 0.0601).

So a float32 result is never held to aten's TF32 result with a fixed
tolerance: both are measured against float64, and with TF32 off neither side
may carry TF32's error."""

import math

import torch

FACTOR = 2

# Unit roundoff of each dtype (half a unit in the last place, relative).
UNIT_ROUNDOFF = {
    torch.float64: 2.0**-53,
    torch.float32: 2.0**-24,
    torch.bfloat16: 2.0**-8,
    torch.float16: 2.0**-11,
}
TF32_ROUNDOFF = 2.0**-11
# float32 matmul precisions (torch.set_float32_matmul_precision) and how
# much each may round a float32 operand.
MATMUL_ROUNDOFF = {"highest": 0.0, "high": TF32_ROUNDOFF, "medium": UNIT_ROUNDOFF[torch.bfloat16]}


def accumulation_roundoff(dtype):
    """The unit roundoff of the precision products are summed in: float64's
    for float64, float32's for float32, bfloat16 and float16 (as aten does)."""
    return UNIT_ROUNDOFF[torch.float64 if dtype == torch.float64 else torch.float32]


def operand_roundoff(dtype, device, cudnn_tf32=None, matmul_precision=None):
    """How much a float32 operand may be rounded before its product on
    `device` under the flags in effect (or those given): 2^-11 where TF32 is
    on, 0 for full precision, and for every other dtype."""
    if dtype != torch.float32 or torch.device(device).type != "cuda":
        return 0.0
    if cudnn_tf32 is None:
        cudnn_tf32 = torch.backends.cudnn.allow_tf32
    if matmul_precision is None:
        matmul_precision = torch.get_float32_matmul_precision()
    return max(TF32_ROUNDOFF if cudnn_tf32 else 0.0, MATMUL_ROUNDOFF.get(matmul_precision, 0.0))


def gradient_terms(grad_output_size, weight_size, groups):
    """The accuracy rule's K for the two gradients of a convolution with this
    grad_output and weight: (per input-gradient element, grad_output's
    channels of its group times the taps; per weight-gradient element, the
    batch times grad_output's positions). A transposed convolution's forward
    and weight gradient are its matching convolution's, with the transposed
    input as grad_output."""
    return (grad_output_size[1] // groups * math.prod(weight_size[2:]),
            grad_output_size[0] * math.prod(grad_output_size[2:]))


def references(run, tensors):
    """(the float64 reference, the magnitudes): `run` on the float64 tensors
    and on their absolute values (None stays None)."""
    def doubled(absolute):
        return [None if t is None else (t.double().abs() if absolute else t.double())
                for t in tensors]
    return run(*doubled(False)), run(*doubled(True))


def propagation_bound(dtype, terms, magnitude, rounding=0.0):
    """What a correct computation of a sum of `terms` products may lose, with
    `magnitude` the largest float64 sum of the products' absolute values and
    `rounding` the operands' own rounding (TF32)."""
    ku = terms * accumulation_roundoff(dtype)
    gamma = ku / (1 - ku) if ku < 0.5 else float("inf")
    return (2 * rounding + gamma) * magnitude


def bound(dtype, aten_error, terms, magnitude, reference_max, rounding=0.0, rewritten=False):
    """The largest error bwdconv's result may have against float64 (see the
    module docstring); `rewritten`: the result is written once more in its dtype."""
    once_more = UNIT_ROUNDOFF[dtype] * magnitude if rewritten else 0.0
    return (max(FACTOR * aten_error, propagation_bound(dtype, terms, magnitude, rounding))
            + UNIT_ROUNDOFF[dtype] * reference_max + once_more)


def max_error(value, reference):
    """The largest absolute difference, as a float64 tensor on the device
    (NaN where either holds NaN, so that no bound holds it)."""
    difference = value.detach().to(torch.float64) - reference.to(torch.float64)
    most = largest(difference)
    return torch.where(difference.isnan().any(), torch.full_like(most, float("nan")), most)


def largest(t):
    """The largest absolute value, as a float64 tensor on t's device (0 for no elements)."""
    if t.numel() == 0:
        return torch.zeros((), dtype=torch.float64, device=t.device)
    return t.detach().to(torch.float64).abs().max()


def errors(values, references):
    """[max_error(v, r) for each pair] as Python floats, in one synchronisation."""
    if not values:
        return []
    return torch.stack([max_error(v, r).to(references[0].device)
                        for v, r in zip(values, references)]).tolist()


def bounds(dtype, atens, references, magnitudes, terms, rounding=None, rewritten=()):
    """[(aten's error, the bound)] for each result: what one call's results
    are held to, whatever computes them (one synchronisation); `rounding` by
    default the operands' on aten's device under the flags in effect;
    `rewritten` the indices of results written once more in their dtype."""
    if not atens:
        return []
    if rounding is None:
        rounding = operand_roundoff(dtype, atens[0].device)
    figures = torch.stack([torch.stack([max_error(a, r), largest(r), largest(m).to(r.device)])
                           for a, r, m in zip(atens, references, magnitudes)]).tolist()
    return [(aten_error, bound(dtype, aten_error, k, magnitude, reference_max, rounding,
                               index in rewritten))
            for index, ((aten_error, reference_max, magnitude), k)
            in enumerate(zip(figures, terms))]


def within(error, limit):
    return error <= limit  # False for NaN
