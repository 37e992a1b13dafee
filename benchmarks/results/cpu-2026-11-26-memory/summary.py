"""A table from runs/scale<S>/*/results.json: per strategy its worst peak
against aten's, and every planned (bwdconv) or tuned peak above aten's peak
plus the gradient's bytes (the default memory budget).

    python summary.py runs/scale8
"""

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent


def rows(directory):
    for path in sorted(directory.glob("*/results.json")):
        for row in json.loads(path.read_text())["results"]:
            if row["status"] == "ok":
                yield path.parent.name, row


def worst_table(worst, what):
    print(f"| {what} | worst peak / aten's peak | run | case | dir | peak MB | aten MB |")
    print("|---|---|---|---|---|---|---|")
    for name, (ratio, run, case, direction, peak, aten) in sorted(worst.items()):
        print(f"| {name} | {ratio:.2f}x | {run} | {case} | {direction} | {peak / 1e6:.3g} "
              f"| {aten / 1e6:.3g} |")


def main(directory):
    by_case, worst, planned = {}, {}, {}
    for run, row in rows(HERE / directory):
        by_case.setdefault((run, row["index"], row["direction"]), {})[row["strategy"]] = row
    over_budget = []
    for (run, _, direction), group in by_case.items():
        aten = group["aten"]
        if not aten["peak_bytes"]:
            continue
        for name, row in group.items():
            ratio = row["peak_bytes"] / aten["peak_bytes"]
            if name != "aten" and ratio > worst.get(name, (0,))[0]:
                worst[name] = (ratio, run, row["case"], direction, row["peak_bytes"],
                               aten["peak_bytes"])
            if name == "bwdconv" and ratio > planned.get(row["plan"], (0,))[0]:
                planned[row["plan"]] = (ratio, run, row["case"], direction, row["peak_bytes"],
                                        aten["peak_bytes"])
            budget = aten["peak_bytes"] + aten["result_bytes"]
            if name in ("bwdconv", "tuned") and row["peak_bytes"] > budget:
                over_budget.append((run, row["case"], direction, name,
                                    row["tuned"] if name == "tuned" else row["plan"],
                                    row["peak_bytes"], budget))
    cases = len(by_case)
    print(f"{cases} (line, direction) cases in {len({k[0] for k in by_case})} runs\n")
    print("Every column, forced strategies included:\n")
    worst_table(worst, "column")
    print("\nThe rules' choice (the bwdconv column), by the strategy it planned:\n")
    worst_table(planned, "planned")
    print(f"\nPlanned or tuned peaks above aten's peak plus the gradient's bytes: "
          f"{len(over_budget)}\n")
    if over_budget:
        print("| run | case | dir | column | choice | peak MB | aten + gradient MB |")
        print("|---|---|---|---|---|---|---|")
        for run, case, direction, name, choice, peak, budget in over_budget:
            print(f"| {run} | {case} | {direction} | {name} | {choice} | {peak / 1e6:.3g} "
                  f"| {budget / 1e6:.3g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
