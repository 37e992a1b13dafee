"""The modelled issue-bound ceiling of the data-movement kernels on H100 SXM and
MI300X for the seed lines (python/bwdconv/bench/suites/seeds.txt), each on the walk the
host launches for it: for a dense dst (dx and the scatter buffer always are)
the staged walk where its rows fit (stride-2 rows, or the interleave's rows of
a few channels in packets along W: staged_rows), else the dense walk where the
kernel has one, else the row walk (instantiation_for). A dense walk's warp
(wave) takes consecutive chunks and issues per pass each path one of its lanes
takes, once (dense_walk_cost, run_shares); a staged walk's warps each pass a
tile loop once per 8 KB tile, some of them describing the tile's rows first
(staged_walk_cost, staged_tile_loop)."""
from __future__ import annotations

import math
import re

from .devices import DEVICES, H100, THREADS_PER_BLOCK
from .seeds import SeedLine, read_seeds

BITS_NAMES = {2: "unsigned short", 4: "unsigned int", 8: "unsigned long", 16: "Bits128"}


def staged_kernel(kernel: str) -> bool:
    return re.match(r"\w+_staged_kernel<", kernel) is not None


def dense_lanes(kernel: str) -> int | None:
    """Elements per 16-byte chunk of a dense-walk kernel (`<name>_dense_kernel<Bits, ...>`),
    None for any other kernel."""
    m = re.match(r"\w+_dense_kernel<([^,>]+)", kernel)
    bytes_of = {name: size for size, name in BITS_NAMES.items()}
    return 16 // bytes_of[m.group(1)] if m and m.group(1) in bytes_of else None


def kernel_configurations(line: SeedLine, element_bytes: int, layout: str) -> list[dict]:
    """The data-movement launches of a seed line's input gradient: elements written
    and read, and the rows of dst's contiguous dim they are walked in (W in NCHW,
    channels in channels_last; dx and the scatter buffer are dense)."""
    if line.direction != 2:
        return []
    (oh, ow), (sh, sw) = line.output(), line.stride
    dx = line.n * line.c * line.h * line.w
    nchw = layout == "nchw"
    # interleave: every dx element written once; Copy slots also read one element.
    # 1x1 (swap1x1): only the slots the small result covers are read (N*C*Ho*Wo);
    # otherwise every phase with taps is read, which covers dx.
    read = line.n * line.c * oh * ow if (line.y, line.x) == (1, 1) else dx
    interleave = {"kernel": "interleave", "written": dx, "read": read,
                  "row_length": line.w if nchw else line.c, "row_step": sw if nchw else 1,
                  "channels": line.c}
    # scatter: the zero-inserted, padded grad_output, read once where it holds values.
    hb, wb = line.h + line.y - 1, line.w + line.x - 1
    scatter = {"kernel": "scatter", "written": line.n * line.k * hb * wb,
               "read": line.n * line.k * oh * ow, "row_length": wb if nchw else line.k,
               "row_step": sw if nchw else 1, "channels": line.k}
    if nchw:
        # a row of W that holds values (oh of the hb rows) has them from its lead
        # on, every sw-th, up to its reach: its interior (scatter.cu, row_interior)
        lead = line.x - 1 - line.pad[1]
        reach = lead + sw * (ow - 1) + 1
        scatter.update(row_head=max(lead, 0), row_tail=max(wb - reach, 0), live_rows=oh / hb)
    if not nchw:  # the dim a staged walk's packet rows run along (staged_rows)
        interleave.update(along=line.w, along_step=sw)
    for config in (interleave, scatter):
        config["element_bytes"] = element_bytes
        # dims outside the row: NCHW merges batch and channels (both dense) and
        # keeps the other spatial dims; channels_last keeps batch and every spatial dim
        config["outer_dims"] = 2 if nchw else 3
        # every row starts 16-byte aligned when a row's bytes are a multiple of 16
        config["rows_aligned"] = config["row_length"] * element_bytes % 16 == 0
        # dst is dense in walk order (the ops allocate dx and the scatter buffer),
        # so the host takes the dense walk where the kernel has one and the
        # element count stays narrow (make_scatter_walk)
        config["dense"] = config["written"] + 2 * 16 // element_bytes < 2 ** 31
    return [interleave, scatter]


def lanes_per_row(chunks: int, row_bytes: int) -> int:
    """Threads sharing a row (hip/layout.cpp, make_row_walk): a power of two
    up to 32 that gives each thread about 4 chunks, two for rows of 32 bytes or more."""
    lanes = 2 if row_bytes >= 32 else 1
    while lanes < 32 and lanes * 8 <= chunks:
        lanes *= 2
    return lanes


def row_walk_cost(config: dict, loop: dict, lanes_per_warp: int) -> tuple[float, float, float] | None:
    """(warp instructions, warp cycles, elements) of one warp of a row-walk kernel:
    lanes_per_warp / L rows, each thread paying the row overhead once and one
    chunk path per chunk, the partial path for the first and last chunk."""
    vector = 16 // config["element_bytes"]
    chunks = -(-(config["row_length"] + vector - 1) // vector)
    lanes = lanes_per_row(chunks, config["row_length"] * config["element_bytes"])
    iterations = -(-chunks // lanes)
    paths = loop["paths"]
    # channels_last rows (step 1) of 16-byte multiples copy; others gather
    steady = paths.get("copy") if config["row_step"] == 1 and config["rows_aligned"] else None
    steady = steady or paths.get("gather") or paths["any"]
    # rows that start 16-byte aligned and whose source spans them (channels_last)
    # have no end chunk; others are charged two (first and last)
    ends = 0 if config["rows_aligned"] and config["row_step"] == 1 else 2
    overhead, end = loop["row_overhead"], loop.get("end_chunk", steady)
    instructions = overhead["instructions"] + iterations * steady["instructions"] + \
        ends * end["instructions"]
    cycles = overhead["cycles"] + iterations * steady["cycles"] + ends * end["cycles"]
    return instructions, cycles, lanes_per_warp / lanes * config["row_length"]


RUN_LANES = 64            # launch.h kRunLanes: a thread's next chunk lies this many chunks on
RUN_GROUPS = 16384        # launch.h kRunGroups
MAX_RUN_PASSES = 64       # launch.h kMaxRunPasses


def dense_passes(chunks: int) -> int:
    """Chunks per thread of a dense walk over `chunks` chunks (launch.h, dense_passes)."""
    return min(max(-(-chunks // (RUN_LANES * RUN_GROUPS)), 1), MAX_RUN_PASSES)


def dense_walk_cost(config: dict, loop: dict, lanes_per_warp: int) -> tuple[float, float, float]:
    """The same for a dense walk (dense_chunk_loop): per pass a warp (wave) issues
    each path one of its lanes takes once (SIMT): `setup` where a lane's chunk
    starts in a later row than its last one left it in (every lane on a
    thread's first pass), `interior` (`copy` for channels_last rows whose bytes
    are a multiple of 16), `pieces` and `rowend`, `chunk` and `crossing` once
    per element position at which a walking lane ends a row (run_shares),
    averaged over the passes of the buffer (dst 16-byte aligned). A row's
    interior is taken as the whole row but for scatter's NCHW rows that hold
    values (row_head, row_tail: the zeros before the first and after the last);
    the interleave's may end earlier where a result's values do. Paths whose
    regions several lanes of a warp take are each counted whole (their shared
    loop overhead twice)."""
    lanes = 16 // config["element_bytes"]
    copies = config["row_step"] == 1 and config["rows_aligned"]
    interior = loop.get("copy") if copies and "copy" in loop else loop.get("interior")
    passes = dense_passes(-(-config["written"] // lanes))
    shares = run_shares(config["row_length"], lanes, lanes_per_warp, passes, interior is not None,
                        "pieces" in loop)
    if config.get("row_head") or config.get("row_tail"):
        # rows that hold values have an interior short of their ends (scatter):
        # the warps over them, mixed in by their share of the rows
        live = config["live_rows"]
        edged = run_shares(config["row_length"], lanes, lanes_per_warp, passes, interior is not None,
                           "pieces" in loop, config["row_head"], config["row_tail"])
        shares = {key: live * edged[key] + (1 - live) * shares[key] for key in shares}
    paths = {"setup": loop.get("setup"), "interior": interior, "pieces": loop.get("pieces"),
             "rowend": loop.get("rowend"), "walking": loop.get("chunk"), "crossings": loop.get("crossing")}
    missing = [name for name, path in paths.items() if path is None and shares[name] > 0]
    if missing:
        raise ValueError(f"no {', '.join(missing)} path found for a walk that takes it")
    total = lambda key: sum(shares[name] * path[key] for name, path in paths.items() if path)
    return total("instructions"), total("cycles"), lanes_per_warp * lanes


def run_shares(row_length: int, lanes: int, width: int, passes: int, interior: bool, pieces: bool,
               head: int = 0, tail: int = 0, samples: int = 4096) -> dict[str, float]:
    """Over the passes of warps (waves) of `width` consecutive chunks of a dense
    dst in runs (16-byte aligned, as the caching allocators give it; chunk c
    holds elements c * lanes ... c * lanes + lanes - 1; rows start at the
    elements m * row_length; a lane's previous chunk lies RUN_LANES chunks
    back): the share of passes in which some lane takes each path, and the
    mean number of element positions at which a walking lane ends a row
    (`crossings`). A chunk is `interior` (the kernel has that path) when it
    lies inside a row's interior (which leaves out the row's first `head` and
    last `tail` elements), else `pieces` (the kernel has that path, rows at
    least a chunk long), `rowend` too when it runs past its row's end, else it
    walks. A lane sets up (`setup`) where its chunk's first element lies in
    another row than its previous chunk left it in (an interior chunk: its own
    row; pieces: the row of its last element; a walked chunk: the row of the
    element after it), and on a thread's first pass (1 / passes of them). The
    pattern repeats after row_length / gcd(row_length, width x lanes) warps;
    longer periods are sampled evenly."""
    L = row_length
    span = width * lanes
    period = L // math.gcd(L, span)
    warps = range(period) if period <= samples else [i * period // samples for i in range(samples)]
    skip = -(-RUN_LANES // width) * period  # whole periods: every previous chunk lies in dst

    def chunk(c: int) -> tuple[str, int, int]:
        """The path chunk c takes, its first element's row and the row it leaves."""
        first = c * lanes
        row, at = divmod(first, L)
        if interior and at >= head and at + lanes <= L - tail:
            return "interior", row, row
        if pieces and L >= lanes:
            return ("rowend" if at + lanes > L else "pieces"), row, row + (at + lanes > L)
        return "walking", row, (first + lanes) // L

    names = ("setup", "interior", "pieces", "rowend", "walking", "crossings")
    shares = dict.fromkeys(names, 0.0)
    for w in warps:
        base = (skip + w) * width
        taken = [chunk(c) for c in range(base, base + width)]
        before = [chunk(c - RUN_LANES) for c in range(base, base + width)]
        paths = {path for path, _, _ in taken}
        shares["setup"] += any(row != left for (_, row, _), (_, _, left) in zip(taken, before))
        shares["interior"] += "interior" in paths
        shares["pieces"] += bool(paths & {"pieces", "rowend"})
        shares["rowend"] += "rowend" in paths
        shares["walking"] += "walking" in paths
        ends = {e for c, (path, _, _) in zip(range(base, base + width), taken) if path == "walking"
                for e in range(lanes) if (c * lanes + e + 1) % L == 0}
        shares["crossings"] += len(ends)
    shares = {key: value / len(warps) for key, value in shares.items()}
    # a thread's first pass sets every lane up
    shares["setup"] = (1 + (passes - 1) * shares["setup"]) / passes
    return shares


STAGED_TILE_BYTES = 8192  # launch.h kStagedTileBytes: dst bytes a block stages per tile
STAGED_SOURCES = 256      # launch.h kStagedSources: (row, residue) sources a tile may span


def staged_rows(config: dict) -> tuple[int, int] | None:
    """The rows a staged walk takes a dense dst in, as (elements per row, step of the
    dim along them), or None where the host keeps the dense walk (hip/layout.cpp):
    stride-2 rows of a chunk or more whose tile spans at most STAGED_SOURCES sources
    (staged_rows_fit); or, for the interleave's channels_last rows shorter than a
    chunk, rows along W of stride 2 whose positions are packets of the channels
    (stages_packets; the seed lines' results are dense, so their rows are stride-1
    runs and their packets whole)."""
    size, step = config["row_length"], config["row_step"]
    lanes = 16 // config["element_bytes"]
    if step == 1 and size < lanes and config["kernel"] == "interleave" and "along" in config:
        size, step = size * config["along"], config["along_step"]
    tile = STAGED_TILE_BYTES // config["element_bytes"]
    span = (tile + size - 2) // size + 1
    fits = step == 2 and size >= lanes and span * step <= STAGED_SOURCES
    return (size, step) if fits else None


def staged_rows_fit(config: dict) -> bool:
    return staged_rows(config) is not None


def staged_walk_cost(config: dict, loop: dict, lanes_per_warp: int) -> tuple[float, float, float]:
    """The same for a staged walk (staged_tile_loop), per warp (wave) and tile: its
    `tile` pass, and the `sources` region for the warps whose threads describe
    the tile's rows (staged_rows: their elements, and a source per residue of
    the dim along them; one thread per source, so ceil(sources / lanes)
    warps), averaged over where in its row a tile starts; a warp stages
    tile / warps per block elements."""
    tile = STAGED_TILE_BYTES // config["element_bytes"]
    warps = THREADS_PER_BLOCK // lanes_per_warp
    size, step = staged_rows(config)
    describing = sum(math.ceil(((start + tile - 1) // size + 1) * step / lanes_per_warp)
                     for start in range(size)) / size
    total = lambda key: loop["tile"][key] + describing / warps * loop["sources"][key]
    return total("instructions"), total("cycles"), tile / warps


def element_walk_cost(config: dict, loop: dict, lanes_per_warp: int) -> tuple[float, float, float]:
    """The same for a kernel with one loop over elements (or channel packets)."""
    packet = packet_elements(config)
    any_path = loop["paths"]["any"]
    return any_path["instructions"], any_path["cycles"], lanes_per_warp * packet


def packet_elements(config: dict) -> int:
    """Channels moved as one element by an element-walk kernel (channels_last only)."""
    if config["row_step"] != 1 or config["row_length"] != config["channels"]:
        return 1
    k = 16 // config["element_bytes"]
    while k > 1 and config["channels"] % k:
        k //= 2
    return k


def instantiation_for(config: dict, kernels: dict[str, dict]) -> str | None:
    """The instantiation the host side launches for a configuration: the dense
    walk (`<kernel>_dense_kernel<Bits, Index, outer dims>`) for a dense dst when
    the source defines one, else the row walk, else the element walk."""
    index = "int" if config["written"] < 2 ** 31 else "long"
    step = config["row_step"] if config["row_step"] in (1, 2) else 0
    # scatter's is <Bits, Index, step, outer dims>, interleave's <..., packets> too
    packets = {"interleave": ", true>" if config["row_step"] == 1 else ", false>", "scatter": ">"}
    staged = f"{config['kernel']}_staged_kernel<{BITS_NAMES[config['element_bytes']]}, {index}, " \
        f"2, {config['outer_dims']}{packets[config['kernel']]}"
    if config.get("dense") and staged_rows_fit(config) and staged in kernels:
        return staged
    # scatter's is <Bits, Index, outer dims>, interleave's <Bits, Index, step, outer dims>
    for dense in (f"{config['kernel']}_dense_kernel<{BITS_NAMES[config['element_bytes']]}, {index}, "
                  f"{args}>" for args in (config["outer_dims"], f"{step}, {config['outer_dims']}")):
        if config.get("dense") and dense in kernels:
            return dense
    row_walk = f"{config['kernel']}_kernel<{BITS_NAMES[config['element_bytes']]}, {index}, " \
        f"{config['row_step'] if config['row_step'] in (1, 2) else 0}, {config['outer_dims']}>"
    if row_walk in kernels:
        return row_walk
    bits = BITS_NAMES[config["element_bytes"] * packet_elements(config)]
    element_walk = f"{config['kernel']}_kernel<{bits}, {index}>"
    return element_walk if element_walk in kernels else None


def model_configuration(config: dict, kernels: dict[str, dict]) -> dict:
    name = instantiation_for(config, kernels)
    out = {"instantiation": name}
    bytes_per_element = config["element_bytes"] * (config["written"] + config["read"]) / config["written"]
    for device in DEVICES:
        t = kernels[name]["targets"].get(device["arch"], {}) if name else {}
        loop = t.get("staged_loop") or t.get("dense_loop") or t.get("loop")
        if not loop:
            out[device["name"]] = None
            continue
        width = device["lanes_per_scheduler"] if device is H100 else device["wave"]
        kind = "staged" if t.get("staged_loop") else "dense" if t.get("dense_loop") else \
            "rows" if "row_overhead" in loop else "elements"
        out["walk"] = kind
        walk = {"staged": staged_walk_cost, "dense": dense_walk_cost, "rows": row_walk_cost,
                "elements": element_walk_cost}[kind]
        instructions, cycles, elements = walk(config, loop, width)
        issuers = device["units"] * (device["schedulers_per_unit"] if device is H100
                                     else device["simds_per_unit"])
        element_rate = issuers * device["clock_hz"] * elements / cycles
        issue_bytes = element_rate * bytes_per_element
        out[device["name"]] = {
            "instructions_per_element": width * instructions / elements,
            "cycles_per_warp": cycles,
            "elements_per_warp": elements,
            "issue_bound_tb_s": issue_bytes / 1e12,
            "fraction_of_hbm": issue_bytes / device["hbm_bytes_per_s"],
            "modelled_tb_s": min(issue_bytes, device["hbm_bytes_per_s"]) / 1e12,
        }
    out["bytes_per_element"] = bytes_per_element
    return out


def model(kernels: list[dict]) -> list[dict]:
    by_name = {k["kernel"]: k for k in kernels if k["role"] == "data_movement"}
    rows = []
    for line in read_seeds():
        for eb in (2, 4):
            for layout in ("nchw", "channels_last"):
                for config in kernel_configurations(line, eb, layout):
                    row = {"line": line.number, "layout": layout, **config}
                    row.update(model_configuration(config, by_name))
                    rows.append(row)
    return rows
