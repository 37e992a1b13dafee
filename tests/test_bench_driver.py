"""The benchmark harness's MIOpenDriver lines: flags, padding modes, round trips,
errors, scaling and the suites."""

import pathlib

import pytest
import torch

from bwdconv.bench import DriverLineError, parse_line, scale_case
from bwdconv.bench.driver import BACKWARD_DATA, BACKWARD_WEIGHT, FORWARD


SUITES = pathlib.Path(__file__).resolve().parents[1] / "python" / "bwdconv" / "bench" / "suites"


SEED = ("convbfp16 -n 16 -c 16 -H 225 -W 225 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 "
        "-m conv -g 1 -F 4 -t 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC --iter 100")


def test_seed_line_every_2d_flag():
    case = parse_line(SEED)
    assert case.dtype == torch.bfloat16
    assert (case.batch, case.in_channels, case.out_channels) == (16, 16, 64)
    assert case.input == (225, 225) and case.filter == (3, 3)
    assert case.padding == (1, 1) and case.stride == (1, 1) and case.dilation == (1, 1)
    assert case.groups == 1 and case.directions == BACKWARD_WEIGHT
    assert case.channels_last and case.filter_channels_last
    assert case.iterations == 100


def test_long_flags_equal_short_flags():
    short = parse_line("convfp16 -n 2 -c 8 -H 9 -W 10 -k 4 -y 3 -x 2 -p 1 -q 0 -u 2 -v 3 "
                       "-l 2 -j 1 -g 2 -F 6 -i 7")
    long = parse_line("convfp16 --batchsize 2 --in_channels 8 --in_h 9 --in_w 10 "
                      "--out_channels 4 --fil_h 3 --fil_w 2 --pad_h 1 --pad_w 0 "
                      "--conv_stride_h 2 --conv_stride_w 3 --dilation_h 2 --dilation_w 1 "
                      "--group_count 2 --forw 6 --iter 7")
    short.line = long.line = ""
    assert short == long
    assert short.dtype == torch.float16
    assert short.direction_list() == [BACKWARD_DATA, BACKWARD_WEIGHT]


def test_3d_flags():
    case = parse_line("conv -n 2 -c 4 --in_d 8 -H 9 -W 10 -k 8 --fil_d 3 -y 1 -x 2 --pad_d 1 "
                      "-p 0 -q 1 --conv_stride_d 2 -u 1 -v 3 --dilation_d 2 -l 1 -j 1 "
                      "--spatial_dim 3 -F 2 --in_layout NDHWC --out_layout NDHWC")
    assert case.dtype == torch.float32 and case.spatial_dims == 3
    assert case.input == (8, 9, 10) and case.filter == (3, 1, 2)
    assert case.padding == (1, 0, 1) and case.stride == (2, 1, 3) and case.dilation == (2, 1, 1)
    assert case.channels_last


def test_3d_short_flags_and_comments():
    """MIOpenDriver's short 3D flags are punctuation; `#` starts a comment only
    where it begins a word."""
    case = parse_line("conv -n 1 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3 --spatial_dim 3 -! 6 -@ 3 "
                      "-# 2 -$ 1 -^ 2 -F 4  # a comment -u 9")
    assert case.input == (6, 8, 8) and case.filter == (3, 3, 3)
    assert case.stride == (2, 1, 1) and case.padding == (1, 0, 0) and case.dilation == (2, 1, 1)
    assert case.directions == BACKWARD_WEIGHT
    assert parse_line("conv -n 1 -c 2 #-c 9").in_channels == 2


def test_every_miopen_driver_short_flag_is_accepted():
    flags = ("-I NCHW -O NCHW -f NCHW -F 0 -n 1 -c 2 -H 5 -W 5 -k 2 -y 3 -x 3 -u 1 -v 1 "
             "-p 0 -q 0 -r 0 -Y 0 -X 0 -i 3 -V 0 -C dir -t 1 -w 0 -s 0 -P 0 -o 0 -d x -e w "
             "-b 0 -m conv -z default -Z 0 -L 1 -l 1 -j 1 -a b -g 1 -D dy -S -1")
    assert parse_line("conv " + flags).input == (5, 5)
    three = parse_line("conv --spatial_dim 3 -! 4 -@ 1 -# 1 -$ 0 -^ 1 -% 0 -n 1 -c 2 -k 2")
    assert three.input == (4, 32, 32) and three.filter == (1, 3, 3)


@pytest.mark.parametrize("line, padding", [
    ("conv -n 1 -c 2 -H 7 -W 8 -k 2 -y 3 -x 5 -p 4 -q 4 -z default", (4, 4)),
    ("conv -n 1 -c 2 -H 7 -W 8 -k 2 -y 3 -x 5 -p 4 -q 4 -z valid", (0, 0)),
    # same: half of max(k - s, 0) when s divides the size, else of max(k - size % s, 0)
    ("conv -n 1 -c 2 -H 7 -W 8 -k 2 -y 3 -x 5 -u 2 -v 2 -z same", (1, 1)),
    ("conv -n 1 -c 2 -H 7 -W 8 -k 2 -y 3 -x 5 -l 2 -j 2 -p 1 -q 1 -z same", (1, 1)),
])
def test_pad_mode_sets_padding_as_miopen_driver_does(line, padding):
    assert parse_line(line).padding == padding


def test_forw_zero_means_every_direction():
    case = parse_line("conv -n 1 -c 2 -H 5 -W 5 -k 2 -y 3 -x 3 -F 0")
    assert case.direction_list() == [FORWARD, BACKWARD_DATA, BACKWARD_WEIGHT]


@pytest.mark.parametrize("line", [
    "conv -n 2 -c 4 -H 9 -W 9 -k 8 -y 3 -x 3 -u 2 -v 2 -g 2 -F 6",
    "convbfp16 -n 1 -c 3 --in_d 4 -H 5 -W 6 -k 2 --fil_d 2 -y 1 -x 3 --spatial_dim 3 -F 2 "
    "--in_layout NDHWC --out_layout NDHWC",
    "conv -m trans -n 1 -c 8 -H 5 -W 5 -k 4 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -Y 1 -X 1 -F 5",
    "convbfp16 -m trans -n 1 -c 4 --in_d 3 -H 5 -W 6 -k 2 --fil_d 2 -y 2 -x 2 --conv_stride_d 2 "
    "-u 2 -v 3 --trans_output_pad_d 1 -X 2 --spatial_dim 3 -F 1",
])
def test_to_line_round_trips(line):
    case = parse_line(line)
    again = parse_line(case.to_line())
    case.line = again.line = ""
    assert again == case


@pytest.mark.parametrize("line, message", [
    ("conv -n 2 -G 3", "unknown flag '-G'"),
    ("conv -n 2 -c 3 -z full", "--pad_mode must be default, same or valid"),
    ("conv -n 2 --frobnicate 3", "unknown flag '--frobnicate'"),
    ("convint8 -n 2", "unknown command 'convint8'"),
    ("conv -n 2 -c", "flag '-c' has no value"),
    ("conv -n two", "flag -n (--batchsize) needs an integer, got 'two'"),
    ("conv -n 2 -n 3", "given twice"),
    ("conv -n 1 -c 2 --in_d 4 -H 5 -W 5", "--in_d needs --spatial_dim 3"),
    ("conv -n 1 -c 2 -H 5 -W 5 --in_layout NCWH", "unsupported layout 'NCWH'"),
    ("conv -n 1 -c 2 -H 5 -W 5 -m deconv", "mode 'deconv' is not supported"),
    ("conv -n 1 -c 2 -H 5 -W 5 -u 2 -v 2 -Y 1", "output padding (-Y/-X) needs -m trans"),
    ("conv -m trans -n 1 -c 2 -H 5 -W 5 -u 2 -v 2 -X 2", "output padding 2 must be smaller"),
    ("conv -m trans -n 1 -c 2 -H 1 -W 5 -y 3 -x 3 -p 2 -q 1", "output [-1, 5] is empty"),
    ("conv -n 1 -c 4 -H 5 -W 5 -k 6 -g 4", "-g 4 must divide -c 4 and -k 6"),
    ("conv -n 1 -c 2 -H 2 -W 5 -k 2 -y 3 -x 3", "smaller than the dilated filter"),
    ("conv -n 1 -c 2 -H 5 -W 5 -u 0", "strides must be positive"),
    ("conv -n 1 -c 2 -H 5 -W 5 -F 9", "-F must be 0-7"),
    ("conv -n 1 -c 2 -H 5 -W 5 --spatial_dim 1", "--spatial_dim must be 2 or 3"),
    ("", "empty line"),
])
def test_bad_lines_name_the_problem(line, message):
    with pytest.raises(DriverLineError) as error:
        parse_line(line)
    assert message in str(error.value)


def test_scale_keeps_groups_and_a_valid_shape():
    case = parse_line("convfp16 -n 32 -c 256 -H 200 -W 200 -k 256 -y 3 -x 3 -p 1 -q 1 "
                      "-u 2 -v 2 -g 32 -F 2")
    small = scale_case(case, 8)
    assert (small.batch, small.input) == (4, (25, 25))
    assert small.in_channels % 32 == 0 and small.out_channels % 32 == 0
    tiny = scale_case(parse_line("conv -n 1 -c 3 -H 7 -W 7 -k 4 -y 7 -x 7 -F 4"), 8)
    assert tiny.input == (7, 7) and tiny.batch == 1


def test_transposed_line_reads_as_miopen_driver_does():
    case = parse_line("conv -m trans -n 2 -c 8 -H 5 -W 6 -k 4 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 "
                      "-Y 1 -X 0 -g 2 -F 1")
    assert case.transposed and case.output_padding == (1, 0)
    assert case.input_size() == [2, 8, 5, 6] and case.weight_size() == [8, 2, 3, 3]
    expected = torch.nn.functional.conv_transpose2d(
        torch.zeros(case.input_size()), torch.zeros(case.weight_size()), stride=2, padding=1,
        output_padding=(1, 0), groups=2)
    assert case.transposed_output() == tuple(expected.shape[2:])
    assert "trans" in case.label()


@pytest.mark.parametrize("suite", ["seeds", "resnet50", "r3d18", "transposed"])
def test_suites_parse(suite):
    lines = [l for l in (SUITES / f"{suite}.txt").read_text().splitlines()
             if l.strip() and not l.startswith("#")]
    cases = [parse_line(l) for l in lines]
    assert len(cases) >= 10
    assert len({c.to_line() for c in cases}) == len(cases), "a suite lists a conv twice"
