"""How two sides timed round by round compare: the ratio of their medians and
the paired ratio, each with a 90% bootstrap interval (docs/benchmarks.md).

Each round times every side once, side by side; `without[i]` and `timed[i]`
are round i's times. A ratio above 1 means `timed` is faster.
"""

import random
import statistics

from bwdconv._overhead import quantile


def bootstrap_interval(statistic, rounds, seed, resamples=1000):
    """A 90% bootstrap interval of statistic(picked round indices): the
    rounds resampled with replacement `resamples` times."""
    draw = random.Random(seed)
    indices = range(rounds)
    values = sorted(statistic([draw.choice(indices) for _ in indices])
                    for _ in range(resamples))
    return values[int(0.05 * resamples)], values[int(0.95 * resamples) - 1]


def ratio_interval(without, timed):
    """A 90% bootstrap interval of median(without) / median(timed): each
    round's pair kept together (the two were timed side by side), so that
    the interval says how far the ratio itself would move on another run of
    as many rounds."""
    return bootstrap_interval(
        lambda picked: statistics.median(without[i] for i in picked) /
        statistics.median(timed[i] for i in picked), len(without), seed=1)


def median_interval(values):
    """A 90% bootstrap interval of the median of `values` (here the rounds'
    own ratios: each round's sides ran within a second of one another, so
    that a drift of the machine's speed over the run cancels in them)."""
    return bootstrap_interval(lambda picked: statistics.median(values[i] for i in picked),
                              len(values), seed=2)


def compare(without, timed):
    """{ratio, ms, ratio_ci90, paired_ratio, paired_ci90, round_ratio_p25,
    round_ratio_p75}: median(without) / median(timed) with its interval, the
    median of the rounds' own ratios with its interval, and their quartiles
    (times in ms)."""
    ratios = [a / b for a, b in zip(without, timed)]
    q1, paired, q3 = (quantile(ratios, q) for q in (0.25, 0.5, 0.75))
    low, high = ratio_interval(without, timed)
    paired_low, paired_high = median_interval(ratios)
    return {"ratio": round(statistics.median(without) / statistics.median(timed), 3),
            "ms": round(statistics.median(timed), 3),
            "ratio_ci90": [round(low, 3), round(high, 3)],
            "paired_ratio": round(paired, 3),
            "paired_ci90": [round(paired_low, 3), round(paired_high, 3)],
            "round_ratio_p25": round(q1, 3), "round_ratio_p75": round(q3, 3)}


def format_cell(cell):
    """`ratio [low-high] paired ratio [low-high]`."""
    return (f"{cell['ratio']:.3f} [{cell['ratio_ci90'][0]:.3f}-{cell['ratio_ci90'][1]:.3f}] "
            f"paired {cell['paired_ratio']:.3f} "
            f"[{cell['paired_ci90'][0]:.3f}-{cell['paired_ci90'][1]:.3f}]")
