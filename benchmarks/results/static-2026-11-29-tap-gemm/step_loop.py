"""The step loop of each tap_gemm kernel in a cubin's SASS: the innermost
loop (a backward branch) that holds the warp matrix products (HMMA), its
instruction count and its global loads, shared stores, products and
barriers. Usage: cuobjdump -sass tap_gemm.cubin | python step_loop.py
"""
import re
import sys

INSTRUCTION = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")
FUNCTION = re.compile(r"Function : (\S+)")
WALKS = {"E0E": "columns", "E1E": "channels", "E2E": "elements"}


def kernels(lines):
    name, body = None, []
    for line in lines:
        found = FUNCTION.search(line)
        if found:
            if name:
                yield name, body
            name, body = found.group(1), []
            continue
        match = INSTRUCTION.match(line)
        if match and name:
            body.append((int(match.group(1), 16), match.group(2)))
    if name:
        yield name, body


def step_loop(body):
    """(first, last) addresses of the smallest loop around an HMMA."""
    best = None
    for address, text in body:
        branch = re.search(r"BRA (0x[0-9a-f]+)", text)
        if not branch or int(branch.group(1), 16) >= address:
            continue
        first = int(branch.group(1), 16)
        inside = [t for a, t in body if first <= a <= address]
        if any("HMMA" in t for t in inside) and (best is None or address - first < best[1] - best[0]):
            best = (first, address)
    return best


def describe(name):
    element = "bfloat16" if "BFloat16" in name else "float16" if "Half" in name else "?"
    walk = next((w for key, w in WALKS.items() if key in name), "one walk")
    return f"{element}, {walk}"


def main():
    print("| kernel | step loop: instructions | global loads | shared stores | HMMA | barriers |")
    print("|---|---|---|---|---|---|")
    for name, body in kernels(sys.stdin):
        loop = step_loop(body)
        if loop is None:
            continue
        inside = [t for a, t in body if loop[0] <= a <= loop[1]]
        count = lambda op: sum(1 for t in inside if re.search(rf"\b{op}", t))
        loads = ", ".join(sorted({m for t in inside for m in re.findall(r"LDG\.\S+", t)}))
        print(f"| {describe(name)} | {len(inside)} | {count('LDG')} ({loads}) | {count('STS')} "
              f"| {count('HMMA')} | {count('BAR')} |")


if __name__ == "__main__":
    main()
