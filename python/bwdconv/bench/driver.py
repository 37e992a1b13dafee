"""MIOpenDriver command lines -> ConvCase.

    convbfp16 -n 16 -c 16 -H 225 -W 225 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -F 4

The first word names the data type (conv: float32, convfp16, convbfp16); the
flags follow MIOpenDriver's names, short or long. -F selects directions as a
bit mask (1 forward, 2 backward data, 4 backward weight; 0 means all three).
`-m trans` is a transposed convolution, as in MIOpenDriver: -c and -H/-W are
its input's channels and sizes, -k its output channels, the weight is
[c, k/g, y, x], and -Y/-X (--trans_output_pad_h/w, -% in 3D) its output
padding; its forward is the matching convolution's input gradient
(docs/DESIGN.md, "Transposed convolutions").
"""

import dataclasses
import re
import shlex

import torch

from bwdconv._args import transposed_spatial_output

DTYPES = {"conv": torch.float32, "convfp16": torch.float16, "convbfp16": torch.bfloat16}
DTYPE_COMMANDS = {v: k for k, v in DTYPES.items()}

FORWARD, BACKWARD_DATA, BACKWARD_WEIGHT = 1, 2, 4
DIRECTION_NAMES = {FORWARD: "fwd", BACKWARD_DATA: "bwd_data", BACKWARD_WEIGHT: "bwd_weight"}

# short flag -> MIOpenDriver's long name
INTEGER_FLAGS = {
    "n": "batchsize",
    "c": "in_channels",
    "H": "in_h",
    "W": "in_w",
    "!": "in_d",
    "k": "out_channels",
    "y": "fil_h",
    "x": "fil_w",
    "@": "fil_d",
    "p": "pad_h",
    "q": "pad_w",
    "$": "pad_d",
    "u": "conv_stride_h",
    "v": "conv_stride_w",
    "#": "conv_stride_d",
    "l": "dilation_h",
    "j": "dilation_w",
    "^": "dilation_d",
    "g": "group_count",
    "F": "forw",
    "i": "iter",
    "_": "spatial_dim",
    "%": "trans_output_pad_d",
    "Y": "trans_output_pad_h",
    "X": "trans_output_pad_w",
}
LAYOUT_FLAGS = {"I": "in_layout", "O": "out_layout", "f": "fil_layout"}
# Accepted for compatibility with MIOpenDriver lines; they do not change what is measured.
IGNORED_FLAGS = {
    "t": "time", "V": "verify", "s": "search", "w": "wall", "b": "bias", "r": "pad_val",
    "C": "verification_cache", "P": "printconv", "o": "dump_output", "d": "in_data",
    "e": "weights", "a": "in_bias", "D": "dout_data", "S": "solution", "Z": "tensor_vect",
    "L": "vector_length",
}
MODE_FLAGS = {"m": "mode", "z": "pad_mode"}

# long name -> short flag, for every flag a line may give
_LONG = {long: short for flags in (INTEGER_FLAGS, LAYOUT_FLAGS, IGNORED_FLAGS, MODE_FLAGS)
         for short, long in flags.items()}


class DriverLineError(ValueError):
    """A MIOpenDriver line bwdconv cannot read; the message names the problem."""


@dataclasses.dataclass
class ConvCase:
    dtype: torch.dtype
    batch: int
    in_channels: int
    out_channels: int
    input: tuple  # spatial sizes, outermost first (D, H, W)
    filter: tuple
    padding: tuple
    stride: tuple
    dilation: tuple
    groups: int = 1
    directions: int = BACKWARD_DATA | BACKWARD_WEIGHT
    channels_last: bool = False  # in/out layout NHWC (NDHWC)
    filter_channels_last: bool = False
    iterations: int | None = None
    line: str = ""
    transposed: bool = False  # -m trans: in_channels/input are the transposed input's
    output_padding: tuple = ()
    # Where the line came from ("seeds:8": a suite's file and line number;
    # "line 1": the first line on the command line); not part of the shape.
    source: str = dataclasses.field(default="", compare=False)

    @property
    def spatial_dims(self):
        return len(self.input)

    def direction_list(self):
        return [d for d in (FORWARD, BACKWARD_DATA, BACKWARD_WEIGHT) if self.directions & d]

    def input_size(self):
        return [self.batch, self.in_channels, *self.input]

    def weight_size(self):
        if self.transposed:
            return [self.in_channels, self.out_channels // self.groups, *self.filter]
        return [self.out_channels, self.in_channels // self.groups, *self.filter]

    def transposed_output(self):
        """A transposed convolution's output sizes: (I-1)s - 2p + d(K-1) + op + 1."""
        return tuple(transposed_spatial_output(self.input, self.filter, self.stride,
                                               self.padding, self.dilation,
                                               self.output_padding))

    def as_convolution(self):
        """This case as a convolution: itself, or for a transposed one the
        convolution whose input gradient its forward is (docs/DESIGN.md,
        "Transposed convolutions"): input the transposed output, channels
        swapped, the same weight tensor; the forward becomes the input
        gradient, the input gradient the forward, the weight gradient stays."""
        if not self.transposed:
            return self
        directions = sum(new for old, new in ((FORWARD, BACKWARD_DATA),
                                              (BACKWARD_DATA, FORWARD),
                                              (BACKWARD_WEIGHT, BACKWARD_WEIGHT))
                         if self.directions & old)
        return dataclasses.replace(
            self, in_channels=self.out_channels, out_channels=self.in_channels,
            input=self.transposed_output(), directions=directions, transposed=False,
            output_padding=())

    def label(self):
        dims = "x".join(map(str, self.input))
        fil = "x".join(map(str, self.filter))
        stride = "x".join(map(str, self.stride))
        layout = " NHWC" if self.channels_last else ""
        group = f" g{self.groups}" if self.groups > 1 else ""
        trans = ""
        if self.transposed:
            trans = " trans" + (f" op{'x'.join(map(str, self.output_padding))}"
                                if any(self.output_padding) else "")
        return (f"{DTYPE_COMMANDS[self.dtype]} n{self.batch} c{self.in_channels} {dims} "
                f"k{self.out_channels} {fil}/{stride}{group}{layout}{trans}")

    def to_line(self):
        """This case as a MIOpenDriver line."""
        words = [DTYPE_COMMANDS[self.dtype], "-n", self.batch, "-c", self.in_channels,
                 "-k", self.out_channels]
        three = self.spatial_dims == 3
        for values, depth, h, w in ((self.input, "in_d", "H", "W"),
                                    (self.filter, "fil_d", "y", "x"),
                                    (self.padding, "pad_d", "p", "q"),
                                    (self.stride, "conv_stride_d", "u", "v"),
                                    (self.dilation, "dilation_d", "l", "j")):
            if three:
                words += [f"--{depth}", values[0]]
            words += [f"-{h}", values[-2], f"-{w}", values[-1]]
        if self.transposed:
            words += ["-m", "trans"]
            if three:
                words += ["--trans_output_pad_d", self.output_padding[0]]
            words += ["-Y", self.output_padding[-2], "-X", self.output_padding[-1]]
        words += ["-g", self.groups, "-F", self.directions]
        if three:
            words += ["--spatial_dim", 3]
        if self.channels_last:
            layout = "NDHWC" if three else "NHWC"
            words += ["--in_layout", layout, "--out_layout", layout]
        if self.filter_channels_last:
            words += ["--fil_layout", "NDHWC" if three else "NHWC"]
        return " ".join(map(str, words))


def _tokens(line):
    """The line's words, up to a comment: a `#` that begins a word (so `-#`,
    MIOpenDriver's depth stride, is a flag)."""
    return shlex.split(re.split(r"(?:^|\s)#", line, maxsplit=1)[0])


def _flag_name(token):
    """'-n' -> 'n', '--batchsize' -> 'n'; raises for unknown flags."""
    if token.startswith("--") and token[2:] in _LONG:
        return _LONG[token[2:]]
    if token.startswith("-") and len(token) == 2 and token[1] in _LONG.values():
        return token[1]
    raise DriverLineError(f"unknown flag {token!r}")


def _layout_is_channels_last(value, flag):
    value = value.upper()
    if value in ("NCHW", "NCDHW"):
        return False
    if value in ("NHWC", "NDHWC"):
        return True
    raise DriverLineError(f"unsupported layout {value!r} for --{flag} (use NCHW/NHWC or NCDHW/NDHWC)")


def parse_line(line):
    """The ConvCase a MIOpenDriver line describes."""
    words = _tokens(line)
    if not words:
        raise DriverLineError("empty line")
    command = words[0]
    if command not in DTYPES:
        raise DriverLineError(
            f"unknown command {command!r}; expected one of {', '.join(DTYPES)}")
    values = {}
    rest = words[1:]
    if len(rest) % 2:
        raise DriverLineError(f"flag {rest[-1]!r} has no value")
    for flag, value in zip(rest[::2], rest[1::2]):
        name = _flag_name(flag)
        if name in values:
            raise DriverLineError(f"flag {flag!r} is given twice")
        values[name] = value
    return _case_from(command, values, line.strip())


def _integer(values, name, default):
    if name not in values:
        return default
    try:
        return int(values[name])
    except ValueError:
        raise DriverLineError(
            f"flag -{name} (--{INTEGER_FLAGS[name]}) needs an integer, got {values[name]!r}"
        ) from None


def _case_from(command, values, line):
    mode = values.get("m", "conv")
    if mode not in ("conv", "trans"):
        raise DriverLineError(f"mode {mode!r} is not supported (-m conv or -m trans)")
    spatial_dims = _integer(values, "_", 2)
    if spatial_dims not in (2, 3):
        raise DriverLineError(f"--spatial_dim must be 2 or 3, got {spatial_dims}")
    if spatial_dims == 2:
        for flag in ("!", "@", "$", "#", "^", "%"):
            if flag in values:
                raise DriverLineError(
                    f"--{INTEGER_FLAGS[flag]} needs --spatial_dim 3")

    def per_dim(d, h, w, default):
        hw = (_integer(values, h, default), _integer(values, w, default))
        return ((_integer(values, d, default),) if spatial_dims == 3 else ()) + hw

    directions = _integer(values, "F", 0)
    if not 0 <= directions <= 7:
        raise DriverLineError(f"-F must be 0-7 (1 fwd, 2 bwd data, 4 bwd weight), got {directions}")
    case = ConvCase(
        dtype=DTYPES[command],
        batch=_integer(values, "n", 100),
        in_channels=_integer(values, "c", 3),
        out_channels=_integer(values, "k", 32),
        input=per_dim("!", "H", "W", 32),
        filter=per_dim("@", "y", "x", 3),
        padding=per_dim("$", "p", "q", 0),
        stride=per_dim("#", "u", "v", 1),
        dilation=per_dim("^", "l", "j", 1),
        groups=_integer(values, "g", 1),
        directions=directions or (FORWARD | BACKWARD_DATA | BACKWARD_WEIGHT),
        iterations=_integer(values, "i", None),
        line=line,
        transposed=mode == "trans",
        output_padding=per_dim("%", "Y", "X", 0),
    )
    in_layout = values.get("I")
    out_layout = values.get("O")
    if in_layout is not None and out_layout is not None and \
            _layout_is_channels_last(in_layout, "in_layout") != \
            _layout_is_channels_last(out_layout, "out_layout"):
        raise DriverLineError("--in_layout and --out_layout must both be channels-first or both channels-last")
    for value, flag in ((in_layout, "in_layout"), (out_layout, "out_layout")):
        if value is not None:
            case.channels_last = _layout_is_channels_last(value, flag)
    if "f" in values:
        case.filter_channels_last = _layout_is_channels_last(values["f"], "fil_layout")
    case.padding = _padding_for_mode(values.get("z", "default"), case)
    _validate(case)
    return case


def _padding_for_mode(pad_mode, case):
    """The padding MIOpenDriver uses under --pad_mode: `default` keeps the
    flags' padding; `valid` is none; `same` pads each side by half of what
    the filter overhangs the last stride step. MIOpenDriver applies a mode
    only when every dilation or every filter size is 1."""
    if pad_mode not in ("default", "same", "valid"):
        raise DriverLineError(f"--pad_mode must be default, same or valid, got {pad_mode!r}")
    undilated = all(d == 1 for d in case.dilation) or all(k == 1 for k in case.filter)
    if pad_mode == "default" or not undilated or min(case.stride) < 1:
        return case.padding
    if pad_mode == "valid":
        return (0,) * case.spatial_dims
    return tuple(max(k - (size % s or s), 0) // 2
                 for size, k, s in zip(case.input, case.filter, case.stride))


def _validate(case):
    checks = [
        (case.batch >= 1, f"batch size -n must be positive, got {case.batch}"),
        (case.groups >= 1, f"group count -g must be positive, got {case.groups}"),
        (case.in_channels % case.groups == 0 and case.out_channels % case.groups == 0,
         f"-g {case.groups} must divide -c {case.in_channels} and -k {case.out_channels}"),
        (all(s >= 1 for s in case.stride), f"strides must be positive, got {case.stride}"),
        (all(d >= 1 for d in case.dilation), f"dilations must be positive, got {case.dilation}"),
        (all(p >= 0 for p in case.padding), f"padding must not be negative, got {case.padding}"),
        (all(k >= 1 for k in case.filter), f"filter sizes must be positive, got {case.filter}"),
    ]
    for ok, message in checks:
        if not ok:
            raise DriverLineError(message)
    if case.transposed:
        _validate_transposed(case)
        return
    if any(case.output_padding):
        raise DriverLineError("output padding (-Y/-X) needs -m trans")
    for i, (size, k, p, d) in enumerate(zip(case.input, case.filter, case.padding, case.dilation)):
        if size + 2 * p < d * (k - 1) + 1:
            raise DriverLineError(
                f"spatial dim {i}: input {size} with padding {p} is smaller than the dilated "
                f"filter {d * (k - 1) + 1}")


def _validate_transposed(case):
    for i, (op, s, d) in enumerate(zip(case.output_padding, case.stride, case.dilation)):
        if op >= max(s, d):
            raise DriverLineError(
                f"spatial dim {i}: output padding {op} must be smaller than the stride {s} or "
                f"the dilation {d}")
    if min(case.input) < 1 or min(case.transposed_output()) < 1:
        raise DriverLineError(
            f"the transposed convolution's output {list(case.transposed_output())} is empty")


def with_layout(case, layout):
    """The case with grad_output and input in `layout` ("channels_first" or
    "channels_last"; None keeps the line's own). A changed case forgets the
    line it was read from (its to_line() describes it)."""
    channels_last = layout == "channels_last"
    if layout is None or channels_last == case.channels_last:
        return case
    return dataclasses.replace(case, channels_last=channels_last, line="")


def with_dtype(case, dtype):
    """The case in `dtype` (None keeps the line's own), like with_layout."""
    if dtype is None or dtype == case.dtype:
        return case
    return dataclasses.replace(case, dtype=dtype, line="")


def scale_case(case, scale):
    """The case shrunk by `scale` in batch, channels and spatial size (for a CPU)."""
    if scale <= 1:
        return case
    g = case.groups

    def channels(c):
        return g * max(1, (c // g) // scale) if c // g >= scale else g * max(1, c // g)

    spatial = tuple(
        max(d * (k - 1) + 1 - 2 * p, size // scale, 1)
        for size, k, p, d in zip(case.input, case.filter, case.padding, case.dilation))
    if case.transposed:  # its input is the small tensor; its output grows from it
        spatial = tuple(max(size // scale, 1) for size in case.input)
    return dataclasses.replace(
        case, batch=max(1, case.batch // scale), in_channels=channels(case.in_channels),
        out_channels=channels(case.out_channels), input=spatial)
