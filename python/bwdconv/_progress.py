"""Progress of the long loops (bench suites, tuning, the models bench).

A tqdm bar on stderr where stderr is a terminal, and nothing where it is not
(a log file, CI, a pipe), so that captured output holds only the results.
The bar clears itself when its loop ends.
"""

import sys

from tqdm import tqdm


def is_terminal(stream):
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def progress_bar(iterable=None, *, desc, unit, total=None, stream=None):
    """tqdm over `iterable` (or updated by hand when it is None), on `stream`
    (default stderr), disabled unless that stream is a terminal."""
    stream = sys.stderr if stream is None else stream
    return tqdm(iterable, desc=desc, unit=unit, total=total, file=stream,
                disable=not is_terminal(stream), leave=False, dynamic_ncols=True)
