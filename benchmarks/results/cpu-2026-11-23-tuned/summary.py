"""Summarises the tuned-column runs: per run, tuned vs aten and vs the rules,
lines tuned slower than aten beyond the noise, and where tuning beat the rules."""
import json, pathlib, statistics, sys

root = pathlib.Path(sys.argv[1])
beat_rules, slower = [], []
print("| run | lines | tuned/aten median | min | max | tuned != rules | tuned slower than aten beyond noise |")
print("|---|---|---|---|---|---|---|")
for run in sorted(p for p in root.iterdir() if (p / "results.json").exists()):
    rows = json.loads((run / "results.json").read_text())["results"]
    groups = {}
    for r in rows:
        groups.setdefault((r["index"], r["direction"]), {})[r["strategy"]] = r
    speedups, differs, worse = [], 0, 0
    for (i, direction), g in sorted(groups.items()):
        if "tuned" not in g or g["tuned"].get("status") != "ok":
            continue
        a, t, b = g["aten"], g["tuned"], g.get("bwdconv")
        speedups.append(t["speedup"])
        # noise: the larger relative p10-p90 half-width of aten's and tuned's times
        noise = max((x["p90_ms"] - x["p10_ms"]) / 2 / x["median_ms"] for x in (a, t))
        if t["median_ms"] > a["median_ms"] * (1 + noise):
            worse += 1
            slower.append((run.name, t["case"], direction, t["tuned"], t["speedup"], noise))
        choice = t["tuned"].split("[")[0]
        if choice != t["plan"]:
            differs += 1
            if b is not None:
                beat_rules.append((run.name, t["case"], direction, t["plan"], t["tuned"],
                                   t["speedup"], b["speedup"]))
    print(f"| {run.name} | {len(speedups)} | {statistics.median(speedups):.2f}x | "
          f"{min(speedups):.2f}x | {max(speedups):.2f}x | {differs} | {worse} |")
print("\nWhere the tuned choice differs from the rules (tuned speedup over aten, rules' speedup):\n")
print("| run | case | dir | rules | tuned | tuned/aten | rules/aten |")
print("|---|---|---|---|---|---|---|")
for r in beat_rules:
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]:.2f}x | {r[6]:.2f}x |")
print("\nTuned slower than aten beyond the noise (p10-p90 half-width):\n")
for s in slower:
    print(f"- {s[0]}: {s[1]} {s[2]}: {s[3]} {s[4]:.2f}x (noise {s[5]:.0%})")
if not slower:
    print("- none")
