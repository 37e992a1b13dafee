"""bwdconv's benchmark harness: MIOpenDriver lines in, strategies vs aten out.

    python -m bwdconv.bench --suite seeds --scale 8
    python -m bwdconv.bench convbfp16 -n 16 -c 16 -H 225 -W 225 -k 64 -y 3 -x 3 -p 1 -q 1 -F 4
"""

from .driver import ConvCase, DriverLineError, parse_line, scale_case

__all__ = ["ConvCase", "DriverLineError", "parse_line", "scale_case", "main"]


def main(argv=None):
    from .cli import main as cli_main

    return cli_main(argv)
