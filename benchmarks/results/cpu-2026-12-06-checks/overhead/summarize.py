import re, statistics, sys
rows = {"conv aten fwd+bwd": r"^\s*conv\s+aten\s+forward\+backward", "transposed aten fwd+bwd": r"^\s*transposed\s+aten\s+forward\+backward",
        "conv aten fwd": r"^\s*conv\s+aten\s+forward\s", "transposed aten fwd": r"^\s*transposed\s+aten\s+forward\s"}
for side in ("base", "main"):
    vals = {}
    for r in range(1, 17):
        text = open(f"{side}-{r}.txt").read().splitlines()
        for name, pat in rows.items():
            for line in text:
                if re.search(pat, line):
                    m = re.search(r"without\s+([\d.]+) us \| functional\s+([+-][\d.]+).*aten\s+([+-][\d.]+)", line)
                    vals.setdefault(name, []).append(tuple(float(x) for x in m.groups()))
    for name, v in vals.items():
        wo = [x[0] for x in v]; f = [x[1] for x in v]; a = [x[2] for x in v]
        print(f"{side} {name:26s} without {statistics.median(wo):6.2f} us | functional {statistics.median(f):+.2f} ({min(f):+.2f}..{max(f):+.2f}) | aten scope {statistics.median(a):+.2f} ({min(a):+.2f}..{max(a):+.2f})")
