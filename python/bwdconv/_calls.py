"""Convolution calls as the random checks draw, run and compare them: the
random tests (tests/test_random_behaviour.py), the GPU check's random and
sanitizer steps (scripts/gpu_random_cases.py, and its --small cases) and
the bench's random steps (bench.random_steps) share a call's geometry, its
operands, the strategies to force, and how PyTorch's own call is run where
it may crash or change its answer. Also the GPU step's draws and the calls
found wrong before (issue 40), which run first."""

import collections
import ctypes
import os
import pickle

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ._accuracy import gradient_terms
from ._args import transposed_spatial_output

DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.float16)
LAYOUTS = ("nchw", "channels_last")
KINDS = ("conv", "transposed")
SCOPES = ("functional", "aten")
TF32_MODES = ("default", "off", "on")
DTYPE_NAMES = {dtype: str(dtype).removeprefix("torch.") for dtype in DTYPES}


class Geometry(collections.namedtuple(
        "Geometry", "kind x_size w_size stride padding output_padding dilation groups")):
    """One call: a convolution (weight O x C/g x k) or a transposed
    convolution (weight C x O/g x k) of an input N x C x spatial."""

    @property
    def dims(self):
        return len(self.stride)

    @property
    def extents(self):
        return [d * (k - 1) + 1 for d, k in zip(self.dilation, self.w_size[2:])]

    def output_spatial(self):
        size = self.x_size[2:]
        if self.kind == "conv":
            return [(i + 2 * p - e) // s + 1 for i, p, e, s in
                    zip(size, self.padding, self.extents, self.stride)]
        return transposed_spatial_output(size, self.w_size[2:], self.stride, self.padding,
                                         self.dilation, self.output_padding)

    def output_channels(self):
        return self.w_size[0] if self.kind == "conv" else self.w_size[1] * self.groups

    def output_size(self):
        return (self.x_size[0], self.output_channels(), *self.output_spatial())

    def valid(self):
        c = self.x_size[1]
        if c % self.groups or self.output_channels() % self.groups:
            return False
        if self.kind == "conv" and self.w_size[1] * self.groups != c:
            return False
        if self.kind == "transposed":
            if self.w_size[0] != c:
                return False
            if any(op >= max(s, d) for op, s, d in
                   zip(self.output_padding, self.stride, self.dilation)):
                return False
        return all(o >= 1 for o in self.output_spatial()) and all(i >= 1 for i in self.x_size)

    def classes(self):
        """The geometry classes of issue 40 this call is in."""
        found = set()
        strided = any(s > 1 for s in self.stride)
        for s, p, e, d in zip(self.stride, self.padding, self.extents, self.dilation):
            if s == 1 and p >= e:
                found.add("stride-1 dim, padding at or past the kernel's extent")
            if s == 1 and d > 1 and strided:
                found.add("dilation beside stride 1")
        if self.kind == "transposed" and any(p > 0 for p in self.padding):
            found.add("transposed, output cropped")
        return found

    def output_position_misses_the_input(self):
        """Whether along some dim an output position's taps all fall in the
        padding (for a transposed call, an input position whose taps all
        land in the cropped part): where PyTorch's CPU convolution (oneDNN)
        crashes on some calls, forward or backward, in any layout
        (docs/limitations.md)."""
        inputs, outputs = self.x_size[2:], self.output_spatial()
        if self.kind == "transposed":  # its matching convolution's
            inputs, outputs = outputs, inputs
        return any(
            all(not 0 <= j * s - p + t * d < n for t in range(k))
            for n, m, s, p, d, k in zip(inputs, outputs, self.stride, self.padding,
                                        self.dilation, self.w_size[2:])
            for j in range(max(m, 0)))

    def padding_reaches_past_the_input_in_3d(self):
        """Whether the call is 3-D and along some dim its padding is at least
        the input's size (a transposed call's: its output's, its matching
        convolution's input): PyTorch 2.11's CPU backward of a channels_last
        conv3d or conv_transpose3d corrupts the heap on some such calls
        (seed 314; not seen in 2-D; docs/limitations.md)."""
        inputs = self.output_spatial() if self.kind == "transposed" else self.x_size[2:]
        return self.dims == 3 and any(p >= n for p, n in zip(self.padding, inputs))

    def may_crash_pytorch(self):
        """Whether the call is of a kind PyTorch's CPU convolution crashes on:
        one to run in a child process first (pytorch_survives)."""
        return (self.output_position_misses_the_input()
                or self.padding_reaches_past_the_input_in_3d())

    def terms(self):
        """How many products each result sums (the accuracy rule's K,
        _accuracy.gradient_terms): output (and its bias), dx, dw (a
        transposed call's: its matching convolution's, x its grad_output), db."""
        of_x, of_y = (gradient_terms(size, self.w_size, self.groups)
                      for size in (self.x_size, self.output_size()))
        return {"out": of_x[0] + 1, "dx": of_y[0],
                "dw": of_y[1] if self.kind == "conv" else of_x[1], "db": of_y[1]}

    def function(self):
        return f"conv{self.dims}d" if self.kind == "conv" else f"conv_transpose{self.dims}d"

    def __call__(self, x, w, b):
        """The call through torch.nn.functional as it stands (looked up at
        the call: enable() replaces it)."""
        return getattr(torch.nn.functional, self.function())(x, w, b, **self.keywords())

    def keywords(self):
        found = dict(stride=self.stride, padding=self.padding, dilation=self.dilation,
                     groups=self.groups)
        if self.kind == "transposed":
            found["output_padding"] = self.output_padding
        return found

    def __str__(self):
        def x(v):
            return "x".join(map(str, v))
        n, c, *size = self.x_size
        text = (f"{self.function()} N{n} C{c}->{self.output_channels()} in {x(size)} "
                f"k{x(self.w_size[2:])} s{x(self.stride)} p{x(self.padding)}")
        if any(self.output_padding):
            text += f" op{x(self.output_padding)}"
        if any(d > 1 for d in self.dilation):
            text += f" d{x(self.dilation)}"
        if self.groups > 1:
            text += f" g{self.groups}"
        return text


def conv(x, w, s, p, d=None, g=1):
    dims = len(s)
    return Geometry("conv", tuple(x), tuple(w), list(s), list(p), [0] * dims,
                    list(d or [1] * dims), g)


def transposed(x, w, s, p, op=None, d=None, g=1):
    dims = len(s)
    return Geometry("transposed", tuple(x), tuple(w), list(s), list(p),
                    list(op or [0] * dims), list(d or [1] * dims), g)


# Issue 40's wrong results (H200, and 7 of them on the host target), each
# with its dtype, NCHW, then the host-mode float16 case.
KNOWN_CASES = [
    (conv((2, 19, 23, 2), (6, 19, 4, 4), [2, 1], [0, 1]), torch.float32),
    (transposed((6, 72, 1, 12, 6), (72, 17, 7, 5, 1), [2, 2, 1], [2, 2, 2], g=4), torch.bfloat16),
    (transposed((2, 44, 14, 12), (44, 1, 1, 1), [2, 1], [0, 3], d=[2, 1], g=4), torch.bfloat16),
    (transposed((5, 9, 27, 2), (9, 12, 7, 4), [2, 1], [2, 1]), torch.float16),
    (conv((5, 19, 31, 2), (22, 19, 1, 4), [2, 1], [0, 3], d=[1, 2]), torch.float16),
    (conv((3, 24, 12, 6, 6), (2, 12, 3, 3, 5), [4, 2, 1], [2, 1, 3], d=[2, 1, 1], g=2),
     torch.bfloat16),
    (conv((3, 1, 33, 2), (16, 1, 2, 5), [2, 1], [1, 3], d=[2, 1]), torch.float32),
    (transposed((4, 5, 39, 7), (5, 14, 7, 1), [2, 1], [2, 2], d=[1, 2]), torch.float32),
    (conv((1, 30, 15, 3), (20, 15, 3, 1), [2, 1], [1, 3], g=2), torch.float32),
    (transposed((2, 9, 9, 10, 4), (9, 21, 3, 7, 1), [4, 2, 1], [0, 0, 1], d=[1, 1, 2]),
     torch.bfloat16),
    (transposed((6, 1, 35, 8), (1, 11, 7, 1), [2, 1], [3, 1]), torch.float16),
    (conv((2, 1, 13, 4), (3, 1, 1, 1), [2, 1], [0, 2]), torch.float16),
    # found on the host target after issue 40: phase_stacked's sub-convolution
    # in PyTorch's CPU bfloat16 conv3d, wrong on some calls (docs/limitations.md)
    (conv((1, 8, 1, 3, 5), (2, 4, 5, 1, 5), [4, 1, 4], [2, 3, 0], g=2), torch.bfloat16),
]


def draw(rng, kind, min_dims=1):
    """A valid random call of `kind`, small enough to run thousands of."""
    while True:
        geometry = _draw_once(rng, kind, min_dims)
        if geometry.valid():
            return geometry


def _draw_once(rng, kind, min_dims):
    dims = rng.choice([d for d in (1, 2, 2, 3) if d >= min_dims])
    groups = rng.choice([1, 1, 1, 2, 3, 4])
    stride = [rng.choice([1, 1, 2, 2, 3, 4]) for _ in range(dims)]
    if all(s == 1 for s in stride) and rng.random() < 0.85:  # the strategies' domain
        stride[rng.randrange(dims)] = rng.choice([2, 3, 4])
    # Issue 40's class: a stride-1 dim whose padding reaches the kernel's extent.
    past_extent = rng.random() < 0.35
    largest_k = 7 if dims < 3 else 5
    # Strided dims long (the walks' rows: issue 40's cases had 23-39), the others short.
    long_size, short_size = {1: (64, 12), 2: (40, 12), 3: (12, 6)}[dims]
    k, dilation, padding, output_padding, size = [], [], [], [], []
    for s in stride:
        ki = rng.choice([1, 1, 2, 3, 3, 4, 5, largest_k])
        di = rng.choice([1, 1, 2, 3]) if s == 1 else rng.choice([1, 1, 1, 2])
        extent = di * (ki - 1) + 1
        tight = s == 1 and past_extent
        if tight:
            ni = rng.randint(1, 8)
        else:
            ni = rng.randint(1, long_size if s > 1 else short_size)
        if kind == "conv":
            pi = rng.randint(extent, extent + 2) if tight else rng.randint(0, (extent + 1) // 2)
            ni = max(ni, extent - 2 * pi)
            opi = 0
        else:
            opi = rng.randint(0, max(s, di) - 1) if rng.random() < 0.4 else 0
            full = (ni - 1) * s + extent + opi  # the output before cropping
            most = (full - 1) // 2
            if tight or rng.random() < 0.4:  # crop hard: padding past the extent where it fits
                pi = rng.randint(min(extent, most), most) if most >= 0 else 0
            else:
                pi = rng.randint(0, max(0, min(most, extent - 1)))
        k.append(ki)
        dilation.append(di)
        padding.append(pi)
        output_padding.append(opi)
        size.append(ni)
    n = rng.randint(1, 4)
    c, o = groups * rng.randint(1, 6), groups * rng.randint(1, 6)
    weight = (o, c // groups) if kind == "conv" else (c, o // groups)
    return Geometry(kind, (n, c, *size), (*weight, *k), stride, padding, output_padding,
                    dilation, groups)


def combinations():
    """Every kind x dtype x layout, in the order the groups cycle through."""
    return [(kind, dtype, layout) for dtype in DTYPES for layout in LAYOUTS for kind in KINDS]


def rounded_randn(generator, sizes, dtype, device="cpu"):
    """Standard normal tensors of `sizes`, drawn in float64 from `generator`
    and rounded to `dtype`, on `device`."""
    return [torch.randn(size, generator=generator, dtype=torch.float64).to(dtype).to(device)
            for size in sizes]


def laid_out(t, layout):
    """`t`'s values in `layout`: "channels_last" (in 2-D and 3-D), "sliced"
    (every other element of a wider tensor), "permuted" (batch and channels
    swapped in memory), "expanded" (where the batch has one sample), else
    contiguous."""
    if layout == "channels_last" and t.dim() in (4, 5):
        return t.contiguous(memory_format=torch.channels_last if t.dim() == 4
                            else torch.channels_last_3d)
    if layout == "sliced":
        wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
        wide[..., ::2] = t
        return wide[..., ::2]
    if layout == "permuted":
        return t.transpose(0, 1).contiguous().transpose(0, 1)
    if layout == "expanded" and t.shape[0] == 1:
        return t[:1].expand(t.shape)
    return t.contiguous()


def served(bwdconv):
    """{gradient: {strategy: count}} of what bwdconv served since its last
    reset_served(), strategies that served nothing left out."""
    return {gradient: {s: n for s, n in by.items() if n}
            for gradient, by in bwdconv.served().items()}


def forcings(bwdconv):
    """(label, strategy, swap1x1 writer): the rules, then every strategy but
    aten forced, swap1x1 with each of its writers."""
    found = [("rules", None, None)]
    for name in bwdconv.strategies():
        if name == "swap1x1":
            found += [(f"swap1x1[{w}]", name, w) for w in bwdconv.swap1x1_writers()]
        elif name != "aten":
            found.append((name, name, None))
    return found


def _walk_the_heap():
    """Has glibc's allocator consolidate its free memory, which checks every
    chunk it meets: a heap a call corrupted aborts the child here, on that
    call, rather than on a later allocation (random seed 314, group 161: a
    channels_last conv_transpose3d's backward passed the probe once, then
    aborted the caller). Nothing where the C library is not glibc."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


class _WeightGradientFirst(TorchDispatchMode):
    """Runs each convolution backward that computes a weight gradient twice:
    for the weight gradient alone first, the heap walked after it, then as
    asked. PyTorch 2.11's CPU float32 weight gradient of some channels_last
    3-D calls whose padding passes the input writes past its buffer. In a
    one-thread child, run alone, it broke the heap in 20 tries of 20 (seed
    314, group 161, and a conv3d); with the input gradient beside it, 0 of 20
    in a bare child and 9 of 20 in the probe's (docs/limitations.md)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.convolution_backward.default and args[-1][1]:
            func(*args[:-1], [False, True, False], **kwargs)
            _walk_the_heap()
        return func(*args, **kwargs)


class _CrashProbe:
    """A child process, forked at its first call, that runs the functions it
    is sent one after the other: a fork per call cost about 30 ms, most of a
    small call's time. A crash ends the child; the next call forks another."""

    def __init__(self):
        requests, self.requests = os.pipe()
        self.replies, replies = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: serve until the parent closes its end
            os.close(self.requests)
            os.close(self.replies)
            self._serve(os.fdopen(requests, "rb"), os.fdopen(replies, "wb"))
        os.close(requests)
        os.close(replies)
        self.requests = os.fdopen(self.requests, "wb")
        self.replies = os.fdopen(self.replies, "rb")

    @staticmethod
    def _serve(requests, replies):
        # One thread: the parent's OpenMP pool does not survive the fork,
        # and a parallel region waiting for it would never end.
        torch.set_num_threads(1)
        while True:
            try:
                function, args = pickle.load(requests)
            except BaseException:
                os._exit(0)
            try:
                with _WeightGradientFirst():
                    function(*args)
            except BaseException:
                pass  # an exception is the parent's to meet and report
            _walk_the_heap()
            replies.write(b"1")
            replies.flush()

    def survives(self, function, args):
        self.requests.write(pickle.dumps((function, args)))
        self.requests.flush()
        if self.replies.read(1) == b"1":
            return True
        self.close()
        return False

    def close(self):
        self.requests.close()
        self.replies.close()
        os.waitpid(self.pid, 0)


_probe = None


def survives_in_a_child(function, *args):
    """Whether `function(*args)` ends, returning or raising, in a child
    process without crashing it: PyTorch's own CPU convolution crashes on
    some calls (Geometry.may_crash_pytorch), and a crash would end the whole
    run. The child is forked once and serves every call until one crashes
    it, so the function and its arguments must mean then what they mean
    now: PyTorch's own calls, made outside bwdconv.enabled(). Its heap is
    not the caller's, so a call that corrupts the heap without crashing at
    once is caught by walking the heap after it (_walk_the_heap). A
    fork per call, which copies the caller's heap, made the random tests
    20 times slower in a pytest worker (65 s a scope against 3 s). On the
    CPU only (a CUDA context does not survive a fork)."""
    global _probe
    if _probe is None:
        _probe = _CrashProbe()
    if _probe.survives(function, args):
        return True
    _probe = None
    return False


def pytorch_survives(geometry, function, *args):
    """Whether `function(*args)`, PyTorch's own call of `geometry`, ends
    without crashing: run in a child process first (survives_in_a_child)
    where the call is of the kind PyTorch's CPU convolution crashes on."""
    if not geometry.may_crash_pytorch():
        return True
    return survives_in_a_child(function, *args)


def same_result(again, first):
    """Whether two runs' tensors are equal bit for bit (NaN where NaN, in
    the same places: a run whose garbage is NaN somewhere does not pass for
    another run's garbage NaN elsewhere)."""
    return again.shape == first.shape and bool(
        torch.isclose(again, first, 0, 0, equal_nan=True).all())


# float32 elements: every 16-byte size class of small blocks up to 1 KiB (a
# small block is handed out again for its own class only), and larger blocks.
# Seed 613: aten's bfloat16 conv1d weight gradient of a tap no input reaches
# was wrong in bwdconv's run and right in PyTorch's own nine, between which
# only 4 KiB and 256 KiB blocks were refilled.
REFILLED_SIZES = tuple(range(4, 257, 4)) + (1 << 10, 1 << 12, 1 << 14, 1 << 16)


def changing_results(run, first, calls):
    """The indices of `first`, the results of `run()`, that `calls` more runs
    ever give otherwise bit for bit (every index where a run raises): PyTorch's
    CPU convolution reads memory it never wrote on some calls
    (docs/limitations.md). Freed blocks of every size the CPU allocator hands
    out again are refilled before each run, since what such a read returns
    otherwise can repeat within a process (a fresh block reads as zeros)."""
    changed = set()
    for call in range(calls):
        for size in REFILLED_SIZES:
            torch.full((size,), (float("nan"), 1e30, -7.0)[call % 3])
        try:
            again = run()
        except Exception:  # noqa: BLE001 - a run that raises changed everything
            return set(range(len(first)))
        if len(again) != len(first):
            return set(range(len(first)))
        changed |= {index for index, (a, f) in enumerate(zip(again, first))
                    if not same_result(a, f)}
    return changed
