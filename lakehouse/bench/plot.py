"""The benchmarks' plots (``--plot FILE``): PNG files drawn with matplotlib's Agg backend (no
display needed), from the same documents ``--format json`` prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

STEP_COLOURS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C",
                "#CCB974", "#64B5CD")


def _figure(panels: int) -> tuple[Any, list[Any]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.6), squeeze=False)
    return fig, list(axes[0])


def _save(fig: Any, path: str | Path) -> Path:
    import matplotlib.pyplot as plt

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, format="png", dpi=110)
    plt.close(fig)
    return out


def _ratio_line(ax: Any, sizes: list[dict[str, Any]], key: str, label: str) -> None:
    """The median ratio ``key`` against rows, the range of the samples as error bars."""
    rows = [s["rows"] for s in sizes]
    med = [s[key]["median"] for s in sizes]
    low = [m - s[key]["low"] for m, s in zip(med, sizes)]
    high = [s[key]["high"] - m for m, s in zip(med, sizes)]
    ax.errorbar(rows, med, yerr=[low, high], marker="o", capsize=4, label=label)
    for x, y in zip(rows, med):
        ax.annotate(f"{y:.2f}x", (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)


def plot_archive(doc: dict[str, Any], path: str | Path) -> Path:
    """``bench archive``'s plot: the ratio to the plain sorted Delta write against rows (median,
    and the range of the samples), and per size the archive run's steps (median seconds) beside
    the baseline's median."""
    fig, (left, right) = _figure(2)
    for store, label in (("local", "local disk"), ("s3", "object store")):
        runs = [r for r in doc["runs"] if r["store"] == store]
        if runs:
            _ratio_line(left, runs, "ratio_archive_to_baseline", f"archive / sorted Delta write ({label})")
    left.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    left.set_xscale("log")
    left.set_xlabel("rows")
    left.set_ylabel("ratio of medians")
    left.set_title(f"archive vs plain sorted Delta write ({doc['repeats']} runs each, {doc['days']} days)")
    left.legend(fontsize=8)

    sizes = [r for r in doc["runs"] if r["store"] == "local"]
    steps = list(dict.fromkeys(k for s in sizes for k in s["archive_steps_seconds"]))
    labels = []
    for i, s in enumerate(sizes):
        bottom = 0.0
        for j, step in enumerate(steps):
            v = s["archive_steps_seconds"].get(step, 0.0)
            right.bar(2 * i, v, bottom=bottom, color=STEP_COLOURS[j % len(STEP_COLOURS)], width=0.8,
                      label=step if i == 0 else None)
            bottom += v
        right.bar(2 * i + 0.9, s["sides"]["baseline_sorted_delta_write"]["median_s"], width=0.8, color="#BBBBBB",
                  label="sorted Delta write" if i == 0 else None)
        labels.append(f"{s['rows']:,}")
    right.set_xticks([2 * i + 0.45 for i in range(len(sizes))], labels)
    right.set_xlabel("rows (archive steps | baseline)")
    right.set_ylabel("seconds (median)")
    right.set_title("where the archive run's time goes (local disk)")
    right.legend(fontsize=7, ncol=2)
    return _save(fig, path)


def plot_stream(doc: dict[str, Any], path: str | Path) -> Path:
    """``bench stream``'s plot: rows per second of plain loads, 1 and 4 producers (median, the
    range of the samples as error bars), and an insert's cost in process and from the command
    line against the 0.2 s goal."""
    fig, (left, right) = _figure(2)
    names = [n for n in ("load", "producers_1", "producers_4") if n in doc["sides"]]
    rows = doc["batches"] * doc["rows_per_batch"]
    med = [doc["sides"][n]["rows_per_s"] for n in names]
    low = [max(0.0, m - rows / doc["sides"][n]["max_s"]) for m, n in zip(med, names)]
    high = [max(0.0, rows / doc["sides"][n]["min_s"] - m) for m, n in zip(med, names)]
    left.bar(names, med, yerr=[low, high], capsize=4, color=STEP_COLOURS[:len(names)])
    for i, v in enumerate(med):
        left.annotate(f"{v:,.0f}", (i, v), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    left.set_ylabel("rows per second (median)")
    left.set_title(f"{doc['batches']} batches of {doc['rows_per_batch']:,} rows ({doc['repeats']} runs each)")
    costs = {"insert (in process)": doc["insert_fixed_cost_s"], "producer insert (command)": doc["cli_insert_s"]}
    right.bar(list(costs), list(costs.values()), color=STEP_COLOURS[3:5])
    right.axhline(0.2, color="grey", linewidth=0.8, linestyle="--", label="0.2 s goal (in process)")
    for i, v in enumerate(costs.values()):
        right.annotate(f"{v:.3f} s", (i, v), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    right.set_ylabel("seconds per one-row insert (median)")
    right.set_title("an insert's fixed cost")
    right.legend(fontsize=8)
    return _save(fig, path)


def plot_incremental(doc: dict[str, Any], path: str | Path) -> Path:
    """``bench incremental``'s plot: each side's median seconds (the range of the samples as
    error bars), and the steps of the new day's archive run beside the full rebuild's."""
    fig, (left, right) = _figure(2)
    names = list(doc["sides"])
    med = [doc["sides"][n]["median_s"] for n in names]
    low = [max(0.0, m - doc["sides"][n]["min_s"]) for m, n in zip(med, names)]
    high = [max(0.0, doc["sides"][n]["max_s"] - m) for m, n in zip(med, names)]
    left.bar(names, med, yerr=[low, high], capsize=4, color=STEP_COLOURS[:len(names)])
    for i, v in enumerate(med):
        left.annotate(f"{v:.2f} s", (i, v), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    left.set_ylabel("seconds (median)")
    r = doc["ratio_new_day_to_full"]["median"]
    left.set_title(f"one new day into {doc['days_archived']} archived days: {r:.3f}x the full rebuild")
    runs = {"new day": doc["new_day_steps_seconds"], "full rebuild": doc["full_steps_seconds"]}
    steps = list(dict.fromkeys(k for v in runs.values() for k in v))
    for i, timings in enumerate(runs.values()):
        bottom = 0.0
        for j, step in enumerate(steps):
            v = timings.get(step, 0.0)
            right.bar(i, v, bottom=bottom, color=STEP_COLOURS[j % len(STEP_COLOURS)], width=0.6,
                      label=step if i == 0 else None)
            bottom += v
    right.set_xticks(range(len(runs)), list(runs))
    right.set_ylabel("seconds (median)")
    right.set_title("the archive runs' steps")
    right.legend(fontsize=7, ncol=2)
    return _save(fig, path)


def plot_query(doc: dict[str, Any], path: str | Path) -> Path:
    """``bench query``'s plot: per query the median seconds of the split on Spark, the one table
    on Spark and the split on DuckDB; and the lookup against the DuckDB scan (log scale)."""
    fig, (left, right) = _figure(2)
    names = list(doc["queries"])
    sides = ("split_spark", "one_table_spark", "split_duckdb")
    for j, side in enumerate(sides):
        med = [doc["queries"][q]["sides"][side]["median_s"] for q in names]
        left.bar([i * (len(sides) + 1) + j for i in range(len(names))], med, color=STEP_COLOURS[j], label=side)
    left.set_xticks([i * (len(sides) + 1) + 1 for i in range(len(names))], names)
    left.set_ylabel("seconds (median)")
    left.set_title(f"{doc['rows']:,} rows: split / one table {doc['ratio_split_to_one_table']:.2f}x (median)")
    left.legend(fontsize=8)
    look = doc["lookup"]["seconds_per_call"]
    right.bar(list(look), list(look.values()), color=STEP_COLOURS[3:5])
    right.set_yscale("log")
    for i, v in enumerate(look.values()):
        right.annotate(f"{v * 1000:.2f} ms", (i, v), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    right.set_ylabel("seconds per call (median, log)")
    right.set_title(f"lookup {doc['lookup']['times_faster_than_duckdb_scan']:.0f}x faster than a DuckDB scan "
                    f"of the day ({doc['lookup']['day_rows']:,} rows)")
    return _save(fig, path)


def plot_age(doc: dict[str, Any], path: str | Path) -> Path:
    """``bench age``'s plot: each operation's median seconds per layout (bars, log scale), and the
    ratio of the most days to the fewest (median, the samples' range as error bars) beside its goal."""
    fig, (left, right) = _figure(2)
    by_name = {o["operation"]: o for o in doc["operations"]}
    ops = list(by_name)
    layouts = [str(n) for n in doc["days"]]
    width = 0.8 / len(layouts)
    for i, n in enumerate(layouts):
        xs = [k + (i - (len(layouts) - 1) / 2) * width for k in range(len(ops))]
        left.bar(xs, [by_name[op]["sides"][n]["median_s"] for op in ops], width,
                 label=f"{n} days", color=STEP_COLOURS[i % len(STEP_COLOURS)])
    left.set_yscale("log")
    left.set_xticks(range(len(ops)))
    left.set_xticklabels(ops, rotation=35, ha="right", fontsize=8)
    left.set_ylabel("seconds (median)")
    left.set_title(f"{doc['rows']:,} rows over {', '.join(layouts)} days ({doc['repeats']} runs each)")
    left.legend(fontsize=8)
    ratios = [by_name[op]["ratio_most_to_fewest_days"] for op in ops]
    med = [r["median"] or 0.0 for r in ratios]
    low = [m - (r["low"] or m) for m, r in zip(med, ratios)]
    high = [(r["high"] or m) - m for m, r in zip(med, ratios)]
    right.errorbar(range(len(ops)), med, yerr=[low, high], fmt="o", capsize=4, label="measured")
    right.scatter(range(len(ops)), [by_name[op]["goal"] for op in ops], marker="_", s=300,
                  color="#C44E52", label="goal")
    for x, y in enumerate(med):
        right.annotate(f"{y:.2f}x", (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)
    right.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    right.set_xticks(range(len(ops)))
    right.set_xticklabels(ops, rotation=35, ha="right", fontsize=8)
    right.set_ylabel(f"{layouts[-1]} days / {layouts[0]} days")
    right.set_title("cost of age: ratio of medians")
    right.legend(fontsize=8)
    return _save(fig, path)
