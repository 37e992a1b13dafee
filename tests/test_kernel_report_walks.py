"""The modelled walks of the seed lines' data movement: which walk the host
launches, the share of passes each path takes, and what a warp issues
(tools/kernel_report/walks.py)."""
import math

import pytest

from kernel_report import seeds, walks


def test_stride_2_rows_that_fit_take_the_staged_walk():
    line = seeds.read_seeds()[1]  # rows of 91, stride 2
    names = {"scatter_staged_kernel<unsigned short, int, 2, 2>": {},
             "interleave_staged_kernel<unsigned short, int, 2, 2, false>": {},
             "interleave_staged_kernel<unsigned short, int, 2, 3, true>": {}}
    names.update({f"{k}_{walk}kernel<unsigned short, int, {step}, {outer}>": {}
                  for k in ("scatter", "interleave") for walk in ("dense_", "")
                  for step, outer in ((2, 2), (1, 3))})
    for config in walks.kernel_configurations(line, 2, "nchw"):
        assert walks.staged_rows(config) == (91, 2)
        assert walks.instantiation_for(config, names).startswith(f"{config['kernel']}_staged_kernel<")
    # channels_last rows of a chunk or more (step 1) keep the dense walk; so do
    # rows whose tile spans more sources than a block's threads (2-byte rows
    # of 32: 129 rows x 2 > 256)
    for config in walks.kernel_configurations(line, 2, "channels_last"):
        assert not walks.staged_rows_fit(config)
        assert "_dense_kernel<" in walks.instantiation_for(config, names)
    short = {"row_length": 32, "row_step": 2, "element_bytes": 2}
    assert not walks.staged_rows_fit(short) and walks.staged_rows_fit({**short, "row_length": 33})
    # per warp and tile: the tile pass, plus the sources for the warps that
    # describe them: a tile of 4096 2-byte elements spans 46 rows of 91 wherever it
    # starts (45 x 91 = 4095), 92 sources: 3 warps of 32 (2 waves of 64) of the block's 8 (4)
    config = next(c for c in walks.kernel_configurations(line, 2, "nchw") if c["kernel"] == "interleave")
    loop = {"tile": {"instructions": 300, "cycles": 400}, "sources": {"instructions": 40, "cycles": 60}}
    spans = [(start + 4095) // 91 + 1 for start in range(91)]
    assert set(spans) == {46}
    instructions, cycles, elements = walks.staged_walk_cost(config, loop, 32)
    assert elements == 4096 / 8
    assert instructions == pytest.approx(300 + 3 / 8 * 40)
    assert cycles == pytest.approx(400 + 3 / 8 * 60)
    instructions, cycles, elements = walks.staged_walk_cost(config, loop, 64)
    assert elements == 4096 / 4 and cycles == pytest.approx(400 + 2 / 4 * 60)
    # 3 channels (line 7): the interleave stages rows along W (1450, stride 2) in
    # packets of the channels, 4350 elements each; the scatter's 32-channel rows stay dense
    line = seeds.read_seeds()[6]
    interleave, scatter = walks.kernel_configurations(line, 2, "channels_last")
    assert walks.staged_rows(interleave) == (4350, 2) and not walks.staged_rows_fit(scatter)
    assert walks.instantiation_for(interleave, names) == \
        "interleave_staged_kernel<unsigned short, int, 2, 3, true>"


def run_shares_by_simulation(row_length, lanes, width, passes, interior, pieces, groups,
                             head=0, tail=0):
    """Every warp of `groups` runs of 64 threads, pass after pass, each thread
    keeping the row its last chunk left it in, as the kernels do."""
    names = ("setup", "interior", "pieces", "rowend", "walking", "crossings")
    totals, count = dict.fromkeys(names, 0), 0
    for g in range(groups):
        left = [None] * 64  # the row each lane's state holds
        for i in range(passes):
            taken = []
            for lane in range(64):
                first = (g * 64 * passes + lane + 64 * i) * lanes
                row, at = first // row_length, first % row_length
                inside = head <= at and at + lanes <= row_length - tail
                if interior and inside:
                    path, after = "interior", row
                elif pieces and row_length >= lanes:
                    path = "rowend" if at + lanes > row_length else "pieces"
                    after = row + 1 if path == "rowend" else row
                else:
                    path, after = "walking", (first + lanes) // row_length
                ends = {e for e in range(lanes) if (first + e + 1) % row_length == 0}
                taken.append((path, left[lane] != row, ends))
                left[lane] = after
            for w in range(0, 64, width):
                warp = taken[w:w + width]
                paths = {p for p, _, _ in warp}
                totals["setup"] += any(s for _, s, _ in warp)
                totals["interior"] += "interior" in paths
                totals["pieces"] += bool(paths & {"pieces", "rowend"})
                totals["rowend"] += "rowend" in paths
                totals["walking"] += "walking" in paths
                totals["crossings"] += len({e for p, _, ends in warp if p == "walking" for e in ends})
                count += 1
    return {key: value / count for key, value in totals.items()}


@pytest.mark.parametrize("row_length, lanes, width, passes", [
    (50, 8, 32, 6), (91, 8, 64, 4), (3, 4, 32, 3), (2016, 8, 32, 8), (1452, 4, 64, 5),
    (256, 8, 32, 2), (7, 8, 32, 1), (725, 2, 64, 8)])
@pytest.mark.parametrize("interior, pieces", [(False, False), (True, True), (True, False)])
def test_run_shares(row_length, lanes, width, passes, interior, pieces):
    shares = walks.run_shares(row_length, lanes, width, passes, interior, pieces)
    groups = max(4 * row_length // math.gcd(row_length, 64 * lanes * passes), 8)
    expected = run_shares_by_simulation(row_length, lanes, width, passes, interior, pieces,
                                        min(groups, 400))
    assert shares == pytest.approx(expected, abs=0.03)


@pytest.mark.parametrize("row_length, lanes, head, tail", [
    (202, 8, 1, 2), (1452, 8, 1, 2), (1452, 4, 1, 2), (50, 8, 0, 9), (725, 8, 17, 0), (31, 4, 3, 3)])
def test_run_shares_with_row_edges(row_length, lanes, head, tail):
    shares = walks.run_shares(row_length, lanes, 32, 4, True, True, head, tail)
    groups = min(max(4 * row_length // math.gcd(row_length, 64 * lanes * 4), 8), 400)
    assert shares == pytest.approx(
        run_shares_by_simulation(row_length, lanes, 32, 4, True, True, groups, head, tail), abs=0.03)


def test_long_rows_set_up_once_per_row():
    # rows of 20000 2-byte elements: a lane moves 512 elements a pass, so a warp
    # of 32 sets up where one of its lanes crossed a row start: about
    # (512 + 256) / 20000 of the passes, plus every lane's first pass
    shares = walks.run_shares(20000, 8, 32, 16, True, True)
    assert shares["setup"] == pytest.approx(1 / 16 + 15 / 16 * 768 / 20000, rel=0.05)
    assert shares["interior"] == pytest.approx(1, abs=0.02)
    # rows shorter than a pass: every pass sets up
    assert walks.run_shares(100, 8, 32, 16, True, True)["setup"] == 1


def test_dense_passes():
    assert walks.dense_passes(1) == 1
    assert walks.dense_passes(64 * 16384) == 1 and walks.dense_passes(64 * 16384 + 1) == 2
    assert walks.dense_passes(2 ** 31) == 64


def test_dense_configurations_take_the_dense_walk():
    line = seeds.read_seeds()[2]  # rows of 50
    scatter = next(c for c in walks.kernel_configurations(line, 2, "nchw") if c["kernel"] == "scatter")
    assert scatter["dense"]
    names = {"scatter_dense_kernel<unsigned short, int, 2, 2>": {},
             "scatter_kernel<unsigned short, int, 2, 2>": {}}
    assert walks.instantiation_for(scatter, names) == "scatter_dense_kernel<unsigned short, int, 2, 2>"
    assert walks.instantiation_for({**scatter, "dense": False}, names) == \
        "scatter_kernel<unsigned short, int, 2, 2>"
    interleave = next(c for c in walks.kernel_configurations(line, 2, "nchw") if c["kernel"] == "interleave")
    assert walks.instantiation_for(interleave, {"interleave_dense_kernel<unsigned short, int, 2, 2>": {}}) == \
        "interleave_dense_kernel<unsigned short, int, 2, 2>"
    # interleave rows of 50 (no row head or tail): each path's cost by its share of passes
    cost = lambda n: {"instructions": n, "cycles": 2 * n}
    loop = {"setup": cost(100), "interior": cost(30), "pieces": cost(60), "rowend": cost(90),
            "chunk": cost(300), "crossing": cost(40)}
    passes = walks.dense_passes(-(-interleave["written"] // 8))
    shares = run_shares_by_simulation(50, 8, 32, passes, True, True, 50)
    instructions, cycles, elements = walks.dense_walk_cost(interleave, loop, 32)
    expected = (100 * shares["setup"] + 30 * shares["interior"] + 60 * shares["pieces"]
                + 90 * shares["rowend"])
    assert elements == 256 and instructions == pytest.approx(expected, rel=0.03)
    assert cycles == pytest.approx(2 * instructions)
    assert shares["walking"] == 0 and shares["setup"] == 1
    # a path the walk takes but the kernel lacks is an error, not a free pass
    with pytest.raises(ValueError):
        walks.dense_walk_cost(interleave, {**loop, "rowend": None}, 32)
    # 3x3, padding 1, stride 2 over W = 200: buffer rows of 202, values at 1, 3, ... 199
    line = seeds.read_seeds()[5]
    scatter = next(c for c in walks.kernel_configurations(line, 2, "nchw") if c["kernel"] == "scatter")
    assert (scatter["row_length"], scatter["row_head"], scatter["row_tail"]) == (202, 1, 2)
    assert scatter["live_rows"] == pytest.approx(100 / 202)


def test_kernel_names_give_the_walk():
    assert walks.dense_lanes("scatter_dense_kernel<unsigned short, int, 2, 2>") == 8
    assert walks.dense_lanes("scatter_kernel<unsigned short, int, 2, 2>") is None
    assert walks.staged_kernel("scatter_staged_kernel<unsigned short, int, 2, 2>")
    assert not walks.staged_kernel("scatter_dense_kernel<unsigned short, int, 2, 2>")
