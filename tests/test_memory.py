"""bwdconv.peak_memory: the CPU count of c10's allocations (docs/DESIGN.md,
"Memory"): what a region allocates and frees, nesting, other threads, and
nothing counted outside a region."""

import threading

import torch

import bwdconv
from bwdconv._library import _C

MB = 10**6


def test_a_region_counts_the_bytes_it_allocates_at_their_highest():
    with bwdconv.peak_memory("cpu") as kept:
        t = torch.empty(MB, dtype=torch.float32)
    assert kept.bytes == 4 * MB
    with bwdconv.peak_memory("cpu") as freed:
        for _ in range(3):
            torch.empty(MB, dtype=torch.float64)  # freed before the next
    assert freed.bytes == 8 * MB
    del t


def test_allocations_before_the_region_are_not_counted_in_it():
    earlier = torch.empty(MB)
    with bwdconv.peak_memory("cpu") as peak:
        del earlier
        torch.empty(MB // 2)
    assert peak.bytes == 2 * MB


def test_regions_nest_and_the_enclosing_one_keeps_the_inner_peak():
    with bwdconv.peak_memory("cpu") as outer:
        a = torch.empty(MB)
        with bwdconv.peak_memory("cpu") as inner:
            torch.empty(2 * MB)
        with bwdconv.peak_memory("cpu") as second:
            torch.empty(MB // 4)
        del a
    assert (inner.bytes, second.bytes, outer.bytes) == (8 * MB, MB, 12 * MB)


def test_other_threads_allocations_are_counted():
    def allocate():
        torch.empty(3 * MB, dtype=torch.uint8)

    with bwdconv.peak_memory("cpu") as peak:
        thread = threading.Thread(target=allocate)
        thread.start()
        thread.join()
    assert peak.bytes == 3 * MB


def test_nothing_is_counted_outside_a_region():
    with bwdconv.peak_memory("cpu"):
        kept = torch.empty(MB)
    counted = _C.counted_cpu_bytes()
    outside = torch.empty(5 * MB)
    assert _C.counted_cpu_bytes() == counted
    del kept  # counted while the region was open: its free is counted
    assert _C.counted_cpu_bytes() == counted - 4 * MB
    del outside
    assert _C.counted_cpu_bytes() == counted - 4 * MB
