"""Progress of the long loops (bench suites, tuning, the models bench).

A tqdm bar on stderr where stderr is a terminal; it clears itself when its
loop ends. Where stderr is not one (a log file, CI, a pipe), a loop that
ends within 30 seconds writes nothing, so that captured output holds only
the results, and a longer one writes a line of its progress every 30
seconds ("bench: 3/9 line [00:45<01:30, ...]"), so that a log shows the work
moving.
"""

import sys

from tqdm import tqdm

# Seconds between the lines written where the stream is not a terminal.
LINE_SECONDS = 30


def is_terminal(stream):
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class _Lines:
    """A file for tqdm that turns its redrawn status into whole lines: the
    carriage returns and the blanking it writes go, a status becomes a line."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        status = text.replace("\r", "").strip()
        if status:
            self.stream.write(status + "\n")

    def flush(self):
        self.stream.flush()


class _LineBar(tqdm):
    """tqdm whose every redraw, also the one a new postfix asks for, waits
    until the loop has run LINE_SECONDS and LINE_SECONDS have passed since
    the last line."""

    def refresh(self, nolock=False, lock_args=None):
        now = self._time()
        if now - self.start_t < LINE_SECONDS or \
                (self.last_print_t > self.start_t and now - self.last_print_t < LINE_SECONDS):
            return False
        return super().refresh(nolock=nolock, lock_args=lock_args)


def progress_bar(iterable=None, *, desc, unit, total=None, stream=None):
    """tqdm over `iterable` (or updated by hand when it is None), on `stream`
    (default stderr): a bar on a terminal, else a line every LINE_SECONDS
    once the loop has run that long."""
    stream = sys.stderr if stream is None else stream
    if is_terminal(stream):
        return tqdm(iterable, desc=desc, unit=unit, total=total, file=stream,
                    leave=False, dynamic_ncols=True)
    return _LineBar(iterable, desc=desc, unit=unit, total=total, file=_Lines(stream),
                leave=False, delay=LINE_SECONDS, mininterval=LINE_SECONDS,
                maxinterval=LINE_SECONDS, ncols=100, ascii=True)
