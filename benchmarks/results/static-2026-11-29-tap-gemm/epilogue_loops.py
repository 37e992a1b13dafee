"""The epilogue loops of each tap_gemm kernel in a cubin's SASS: every loop
(a backward branch) after the last warp matrix product (HMMA) that stores to
global memory, innermost first, with its instruction count, global stores
and shared loads. Static counts: a loop body with two paths counts both.
Usage: cuobjdump -sass tap_gemm.cubin | python epilogue_loops.py
"""
import re
import sys

from step_loop import describe, kernels


def store_loops(body):
    """(first, last) addresses of the loops after the last HMMA that hold a
    global store, smallest first."""
    last_product = max(a for a, t in body if "HMMA" in t)
    loops = []
    for address, text in body:
        branch = re.search(r"BRA (0x[0-9a-f]+)", text)
        if not branch or not last_product < int(branch.group(1), 16) < address:
            continue
        first = int(branch.group(1), 16)
        if any("STG" in t for a, t in body if first <= a <= address):
            loops.append((first, address))
    return sorted(loops, key=lambda loop: loop[1] - loop[0])


def main():
    print("| kernel | loop | instructions | global stores | shared loads |")
    print("|---|---|---|---|---|")
    for name, body in kernels(sys.stdin):
        for first, last in store_loops(body):
            inside = [t for a, t in body if first <= a <= last]
            count = lambda op: sum(1 for t in inside if re.search(rf"\b{op}", t))  # noqa: E731
            print(f"| {describe(name)} | {first:#x}-{last:#x} | {len(inside)} | {count('STG')} "
                  f"| {count('LDS')} |")


if __name__ == "__main__":
    main()
