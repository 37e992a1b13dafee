"""The seed lines (python/bwdconv/bench/suites/seeds.txt): each line's convolution, as
the report's models read it."""
from __future__ import annotations

from dataclasses import dataclass

from . import SEEDS


@dataclass
class SeedLine:
    number: int
    n: int
    c: int
    h: int
    w: int
    k: int
    y: int
    x: int
    pad: tuple[int, int]
    stride: tuple[int, int]
    groups: int
    direction: int
    text: str

    def output(self) -> tuple[int, int]:
        return tuple((i + 2 * p - f) // s + 1 for i, p, f, s in
                     zip((self.h, self.w), self.pad, (self.y, self.x), self.stride))


def seed_options(text: str) -> dict[str, int]:
    """A seed line's flags and their values (`-n 16 -c 64 ...`), the command before them left out."""
    args = text.split()[1:]
    return {args[i]: int(args[i + 1]) for i in range(0, len(args) - 1, 2)}


def read_seeds() -> list[SeedLine]:
    lines = []
    for text in SEEDS.read_text().splitlines():
        if not text.strip() or text.startswith("#"):
            continue
        opts = seed_options(text)
        lines.append(SeedLine(len(lines) + 1, opts["-n"], opts["-c"], opts["-H"], opts["-W"],
                              opts["-k"], opts["-y"], opts["-x"], (opts["-p"], opts["-q"]),
                              (opts["-u"], opts["-v"]), opts.get("-g", 1), opts["-F"], text))
    return lines


def seed_dilation(line: SeedLine) -> tuple[int, int]:
    opts = seed_options(line.text)
    return opts.get("-l", 1), opts.get("-j", 1)
