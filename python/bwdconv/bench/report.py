"""Benchmark results as a terminal table, JSON, CSV, markdown and a PNG plot."""

import csv
import json
import pathlib


def _time_cell(row, aten):
    """Median ms and speedup over aten (a cell is given the case's aten row)."""
    if row["status"] != "ok":
        return "WRONG"
    speedup = f" {row['speedup']:.2f}x" if row.get("speedup") else ""
    return f"{row['median_ms']:.3f}{speedup}"


def _memory_cell(row, aten):
    """Peak MB one call adds, and its ratio to aten's peak."""
    if row["status"] != "ok" or row.get("peak_bytes") is None:
        return "-"
    ratio = f" {row['peak_bytes'] / aten['peak_bytes']:.2f}x" \
        if row is not aten and aten.get("peak_bytes") else ""
    return f"{row['peak_bytes'] / 1e6:.3g}{ratio}"


def _groups(rows):
    """[(case, direction, rows)] in run order, one entry per case of the run."""
    groups = {}
    for row in rows:
        groups.setdefault((row["index"], row["case"], row["direction"]), []).append(row)
    return [(case, direction, group) for (_, case, direction), group in groups.items()]


def _columns(rows):
    names = []
    for row in rows:
        if row["strategy"] not in names:
            names.append(row["strategy"])
    return names


def above_budget(rows):
    """The planned (bwdconv) and tuned rows whose peak exceeds aten's peak plus
    the gradient's bytes, the default memory budget (docs/tuning.md): [(case,
    direction, column, choice, peak bytes, budget bytes)]."""
    above = []
    for case, direction, group in _groups(rows):
        aten = next((r for r in group if r["strategy"] == "aten"), {})
        if aten.get("peak_bytes") is None or aten.get("result_bytes") is None:
            continue
        budget = aten["peak_bytes"] + aten["result_bytes"]
        for row in group:
            if row["strategy"] in ("bwdconv", "tuned") and row["status"] == "ok" \
                    and row.get("peak_bytes") is not None and row["peak_bytes"] > budget:
                tuned = row.get("tuned", "-") if row["strategy"] == "tuned" else "-"
                choice = row["plan"] if tuned == "-" else tuned  # untuned: the rules' plan
                above.append((case, direction, row["strategy"], choice, row["peak_bytes"], budget))
    return above


def _cells(group, columns, cell):
    by_name = {r["strategy"]: r for r in group}
    return [cell(by_name[c], by_name.get("aten", {})) if c in by_name else "-" for c in columns]


def table(rows):
    """The report's tables, as the run prints them: ms and speedup over aten
    per strategy, then the peak MB one call adds and its ratio to aten's."""
    return "\n".join(_markdown_table(rows, _time_cell) +
                     ["", "peak memory added per call (MB, ratio to aten)", ""] +
                     _markdown_table(rows, _memory_cell))


def write_json(path, result):
    """`result` as JSON at `path`, where a path is given."""
    if path:
        pathlib.Path(path).write_text(json.dumps(result, indent=2, default=str))


def write_csv(path, rows):
    fields = ["index", "case", "from", "direction", "strategy", "plan", "tuned", "status",
              "median_ms", "p10_ms", "p90_ms", "speedup", "peak_bytes", "result_bytes", "tflops",
              "gbps", "roofline", "iterations", "max_error", "aten_max_error", "line"]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def markdown(meta, rows, plot_name):
    lines = ["# bwdconv benchmark", ""]
    lines += [f"- {key}: {value}" for key, value in meta.items()]
    lines += ["", "Median milliseconds per call and speedup over aten measured in the same run; "
              "`bwdconv` is the planner's rules, `tuned` autotuning's measured and verified choice "
              "(named in the tuned column; its first call tunes, untimed), both with bwdconv's "
              "per-call cost for their choice added (`call_cost` above), as a user's call pays "
              "it; the other columns force one strategy and time its gradient alone. `from` names "
              "the suite lines (file:line) or command-line lines a row times: lines that scale "
              "into the same shape are timed once.", ""]
    lines += _markdown_table(rows, _time_cell)
    lines += ["", "Peak memory one call adds (MB: the bytes allocated during the call and not yet "
              "freed, at their highest, its result included; docs/DESIGN.md, \"Memory\") and its "
              "ratio to aten's:", ""]
    lines += _markdown_table(rows, _memory_cell)
    above = above_budget(rows)
    lines += ["", f"Planned or tuned peaks above aten's peak plus the gradient's bytes (the default "
              f"memory budget): {len(above)}"]
    if above:
        lines += ["", "| case | dir | column | choice | peak MB | aten + gradient MB |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {case} | {direction} | {column} | {choice} | {peak / 1e6:.3g} | "
                  f"{budget / 1e6:.3g} |"
                  for case, direction, column, choice, peak, budget in above]
    lines += ["", "Achieved throughput of the planner's choice (fraction of the roofline: peak "
              "compute or memory bandwidth, whichever bounds the call):", "",
              "| case | dir | TFLOP/s | GB/s | roofline |", "|---|---|---|---|---|"]
    for case, direction, group in _groups(rows):
        chosen = next((r for r in group if r["strategy"] == "bwdconv"), group[0])
        if chosen["status"] == "ok":
            lines.append(f"| {case} | {direction} | {chosen['tflops']:.3f} | {chosen['gbps']:.1f} "
                         f"| {chosen['roofline']:.1%} |")
    if plot_name:
        lines += ["", f"![speedup over aten]({plot_name})"]
    return "\n".join(lines) + "\n"


def _markdown_table(rows, cell):
    columns = _columns(rows)
    lines = ["| case | from | dir | plan | tuned | " + " | ".join(columns) + " |",
             "|" + "---|" * (5 + len(columns))]
    for case, direction, group in _groups(rows):
        lines.append(f"| {case} | {group[0].get('from') or '-'} | {direction} | "
                     f"{group[0]['plan'] or '-'} | "
                     f"{group[0].get('tuned', '-')} | " +
                     " | ".join(_cells(group, columns, cell)) + " |")
    return lines


def _peak_ratio(row, group):
    aten = next((r for r in group if r["strategy"] == "aten"), {})
    if row.get("peak_bytes") is None or not aten.get("peak_bytes"):
        return None
    return row["peak_bytes"] / aten["peak_bytes"]


def _bars(ax, groups, strategies, value, height, colors):
    """One bar per (case, direction) and strategy with a value; a line at 1 (aten)."""
    for s_index, strategy in enumerate(strategies):
        ys, values = [], []
        for g_index, (_, _, group) in enumerate(groups):
            row = next((r for r in group if r["strategy"] == strategy and r["status"] == "ok"), None)
            if row and value(row, group):
                ys.append(g_index + s_index * height)
                values.append(value(row, group))
        ax.barh(ys, values, height=height, label=strategy, color=colors(s_index))
    ax.axvline(1.0, color="black", linewidth=1)


def plot(path, meta, rows):
    """Horizontal bars per (case, direction) and strategy: speedup over aten,
    and beside it the peak memory one call adds over aten's. Returns False
    (no plot) where matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return False

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [(case, direction, g) for case, direction, g in _groups(rows)
              if any(r["strategy"] != "aten" for r in g)]
    if not groups:
        return False
    strategies = [c for c in _columns(rows) if c != "aten"]
    height = 0.8 / len(strategies)
    fig, (speed, memory) = plt.subplots(
        1, 2, sharey=True, figsize=(15, 1.0 + 0.22 * len(groups) * len(strategies) +
                                    0.3 * len(groups)))
    colors = plt.get_cmap("tab10")
    _bars(speed, groups, strategies, lambda row, group: row.get("speedup"), height, colors)
    _bars(memory, groups, strategies, _peak_ratio, height, colors)
    speed.set_yticks([i + 0.4 - height / 2 for i in range(len(groups))])
    speed.set_yticklabels([f"{case} {direction}" for case, direction, _ in groups], fontsize=8)
    speed.invert_yaxis()
    speed.set_xlabel("speedup over aten (higher is better; 1 = aten)")
    memory.set_xlabel("peak memory added over aten's (lower is better; 1 = aten)")
    fig.suptitle(f"bwdconv vs aten: {meta.get('device')} ({meta.get('date')}, "
                 f"torch {meta.get('torch')})", fontsize=10)
    speed.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_all(out_dir, meta, rows):
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "results.json", {"meta": meta, "results": rows})
    write_csv(out / "results.csv", rows)
    plot_written = plot(out / "speedup.png", meta, rows)
    (out / "report.md").write_text(markdown(meta, rows, "speedup.png" if plot_written else None))
    return out
