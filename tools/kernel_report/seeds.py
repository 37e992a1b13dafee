"""The seed lines (benchmarks/suites/seeds.txt): each line's convolution, as
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


def read_seeds() -> list[SeedLine]:
    lines = []
    for text in SEEDS.read_text().splitlines():
        if not text.strip() or text.startswith("#"):
            continue
        args = text.split()[1:]
        opts = {args[i]: int(args[i + 1]) for i in range(0, len(args) - 1, 2)}
        lines.append(SeedLine(len(lines) + 1, opts["-n"], opts["-c"], opts["-H"], opts["-W"],
                              opts["-k"], opts["-y"], opts["-x"], (opts["-p"], opts["-q"]),
                              (opts["-u"], opts["-v"]), opts.get("-g", 1), opts["-F"], text))
    return lines
