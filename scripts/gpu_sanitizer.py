"""compute-sanitizer's findings, split between bwdconv's own kernels and the
vendors' (the GPU check's sanitizer steps, scripts/gpu_check.sh).

    python scripts/gpu_sanitizer.py run --tool racecheck \\
        --summary OUT.md -- python scripts/gpu_random_cases.py --small

`run` runs the command under compute-sanitizer (--sanitizer, or
compute-sanitizer on PATH, or /usr/local/cuda/bin/compute-sanitizer), every
kernel instrumented, its output echoed as it comes, then reads it. It fails
(exit 1) on

- a memory error, race hazard or API error in bwdconv's own kernels: the
  __global__ functions of csrc/hip/*.cu (namespace bwdconv::hip), or an API
  error whose host backtrace passes through bwdconv;
- a finding it cannot attribute to any kernel;
- the command itself failing (its own checks, or the sanitizer stopping it).

Findings inside vendor kernels (cuDNN's sm90_xmma_..., cuBLAS, PyTorch's
own) are counted and named in the summary, not failures.

What it reads (the formats of compute-sanitizer 2022-2025 and cuda-memcheck):
a finding starts on a line "========= <what>" and goes on over the lines
"=========     ..." below it:

    ========= Invalid __global__ read of size 4 bytes
    =========     at 0x3b0 in void kernel<float>(float*, int)           (older)
    =========     at kernel(float*, int)+0x490 [in /path/file.cu:12]    (newer)
    =========     by thread (1,0,0) in block (0,0,0)
    ========= Error: Race reported between Write access at K+0x1c0 in /path/f.cu:150
    =========     and Read access at K+0x2a0 in /path/f.cu:160 [80 hazards]
    ========= ERROR: Race reported between Read access at 0x6360 in /path/f.cu:123:K(...)
    ========= ERROR: Potential RAW hazard detected at __shared__ 0x8 in block (0,0,0) :
    =========     Write Thread (1,0,0) at 0x10 in /path/f.cu:5:K(...)
    ========= Program hit cudaErrorInvalidValue (error 1) due to "invalid argument" on CUDA API call to cudaFuncGetAttributes.
    =========     Host Frame: ... [0x1234] in /site-packages/bwdconv/_C.so
    ========= Target application returned an error
    ========= ERROR SUMMARY: 2 errors
    ========= RACECHECK SUMMARY: 3 hazards displayed (3 errors, 0 warnings)
"""

import argparse
import collections
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX = "========="

# A finding's first line, by kind.
MEMORY = re.compile(
    r"^(Invalid __\w+__ (read|write|atomic)|Misaligned|Out-of-range|Uninitialized|"
    r"Barrier error|Illegal|Malformed|Warp (Illegal|Misaligned|Out-of-range)|"
    r"Hardware Exception|Invalid (PC|Address)|Unspecified|Stack overflow|"
    r"Invalid .* (read|write) of size|Cuda API error|Leaked \d+ bytes)", re.IGNORECASE)
RACE = re.compile(r"^(ERROR|Error|WARNING|Warning|INFO|Info):\s*Race reported between\s+(.*)$")
HAZARD = re.compile(r"^(ERROR|Error|WARNING|Warning|INFO|Info):\s*Potential (\w+) hazard "
                    r"detected(.*)$")
API = re.compile(r"^Program hit (\w+)")
APPLICATION = re.compile(r"^(Error: process didn't terminate successfully|"
                         r"Target application returned an error|"
                         r"Error: Target application terminated before first instrumented API)")
SUMMARY = re.compile(r"^(ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|"
                     r"(MEMCHECK|INITCHECK|SYNCCHECK) SUMMARY):\s*(.*)$")
HAZARDS = re.compile(r"\[(\d+) hazards?\]")
ACCESS = re.compile(r"^(?:and\s+)?(\w+) access at (.*?)(?:\s*\[\d+ hazards?\])?$")
THREAD_ACCESS = re.compile(r"^(\w+) Thread \([^)]*\) at (.*)$")
AT = re.compile(r"^at (.*)$")
SEVERE = ("ERROR", "Error")


def own_kernel_names(root=ROOT):
    """The __global__ functions of csrc/hip/*.cu: bwdconv's own kernels."""
    names = set()
    for path in glob.glob(os.path.join(root, "csrc", "hip", "*.cu")):
        with open(path) as f:
            text = f.read()
        names.update(re.findall(
            r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(", text))
    return names


def _top_level(text, stop):
    """The indices of the `stop` characters outside <...> and (...)."""
    found, depth = [], 0
    for i, ch in enumerate(text):
        if ch in stop and depth == 0:
            found.append(i)
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
    return found


def _before_top_level(text, stop):
    """`text` up to its first `stop` character outside <...> and (...)."""
    return text[:next(iter(_top_level(text, stop)), len(text))]


def kernel_of(location):
    """(the function's name, the file, if any) from where a finding lies:
    "0x3b0 in void k<float>(float*)", "k(float*)+0x490 in /f.cu:12",
    "0x6360 in /f.cu:123:k(pixel const*)", "ns::k<(int)1>(T1)+0x10"."""
    text = location.strip()
    path = None
    match = re.match(r"^0x[0-9a-fA-F]+\s+in\s+(.*)$", text)
    if match:
        text = match.group(1)
    match = re.match(r"^(.*?)\+0x[0-9a-fA-F]+(?:\s+in\s+(\S+))?\s*$", text)
    if match:
        text, path = match.group(1), match.group(2)
        if path:
            path = re.sub(r"(:\d+)+$", "", path)
    match = re.match(r"^(/?[^\s:()<>]+\.(?:cu|cuh|h|hpp|cpp|c|cc)):\d+:(.*)$", text)
    if match:
        path, text = match.group(1), match.group(2)
    text = text.replace("(anonymous namespace)", "{anonymous}")
    text = _before_top_level(text, "(").strip()  # drop the parameters
    # Drop the return type ("void ", "__half "): text after the last space
    # outside template arguments.
    spaces = _top_level(text, " ")
    if spaces:
        text = text[spaces[-1] + 1:]
    return text.replace("{anonymous}", "(anonymous namespace)"), path


def base_name(name):
    """The unqualified name without template arguments: scatter_kernel."""
    return _before_top_level(name, "<").split("::")[-1]


def is_own(name, path, own_names):
    """Whether a kernel is one of bwdconv's (csrc/hip): by its namespace, its
    file, or its name where no other namespace qualifies it."""
    if "bwdconv" in name or (path and re.search(r"csrc/hip/[\w.]+$", path)):
        return True
    qualified = "::" in _before_top_level(name, "<")
    return base_name(name) in own_names and not qualified


Finding = collections.namedtuple("Finding", "kind severity what kernels count own text")


def _records(text):
    """[(header, [continuation lines])] of the sanitizer's own lines."""
    records = []
    for raw in text.splitlines():
        if not raw.startswith(PREFIX):
            continue
        body = raw[len(PREFIX):]
        if not body.strip():
            continue
        if body.startswith("     ") or body.startswith("\t"):
            if records:
                records[-1][1].append(body.strip())
        else:
            records.append((body.strip(), []))
    return records


def parse(text, own_names=None):
    """{"findings": [Finding], "application_failed": bool, "summaries": [...],
    "unattributed": [text]} from compute-sanitizer's output."""
    own_names = own_kernel_names() if own_names is None else own_names
    findings, summaries, unattributed = [], [], []
    application_failed = False

    def finding(kind, severity, what, locations, count, header, lines):
        kernels, owns = [], []
        for location in locations:
            name, path = kernel_of(location)
            if name:
                kernels.append(name)
                owns.append(is_own(name, path, own_names))
        text = "\n".join([header] + lines)
        if not kernels:
            unattributed.append(text)
        findings.append(Finding(kind, severity, what, tuple(dict.fromkeys(kernels)), count,
                                any(owns), text))

    for header, lines in _records(text):
        if APPLICATION.match(header):
            application_failed = True
            continue
        match = SUMMARY.match(header)
        if match:
            summaries.append(header)
            continue
        match = RACE.match(header)
        if match:
            severity = match.group(1).upper()
            locations, count, kinds = [], 0, []
            for line in [match.group(2)] + lines:
                access = ACCESS.match(line)
                if access:
                    kinds.append(access.group(1))
                    locations.append(access.group(2))
                hazards = HAZARDS.search(line)
                count += int(hazards.group(1)) if hazards else 0
            finding("race", severity, " / ".join(kinds) or "race", locations, max(count, 1),
                    header, lines)
            continue
        match = HAZARD.match(header)
        if match:
            locations = [m.group(2) for m in map(THREAD_ACCESS.match, lines) if m]
            finding("race", match.group(1).upper(), f"{match.group(2)} hazard", locations, 1,
                    header, lines)
            continue
        match = API.match(header)
        if match:
            frames = " ".join(lines)
            # An API error is bwdconv's when its host backtrace passes through bwdconv.
            own = "bwdconv" in frames
            findings.append(Finding("api", "ERROR", match.group(1), (), 1, own,
                                    "\n".join([header] + lines)))
            continue
        if MEMORY.match(header):
            locations = [m.group(1) for m in map(AT.match, lines) if m][:1]
            finding("memory", "ERROR", header, locations, 1, header, lines)
            continue
        if re.search(r"\b(error|hazard|invalid|race)\b", header, re.IGNORECASE):
            unattributed.append("\n".join([header] + lines))
            findings.append(Finding("unknown", "ERROR", header, (), 1, False,
                                    "\n".join([header] + lines)))
    return {"findings": findings, "application_failed": application_failed,
            "summaries": summaries, "unattributed": unattributed}


def judge(parsed, returncode=0):
    """(failed, [reasons]): what fails the step (see the module docstring)."""
    reasons = []
    own = [f for f in parsed["findings"] if f.own and f.severity in SEVERE]
    if own:
        kernels = sorted({k for f in own for k in f.kernels} or {"(host backtrace)"})
        reasons.append(f"{len(own)} finding(s) in bwdconv's kernels: {', '.join(kernels)}")
    if parsed["unattributed"]:
        reasons.append(f"{len(parsed['unattributed'])} finding(s) attributed to no kernel")
    if parsed["application_failed"] or returncode != 0:
        reasons.append(f"the command failed (exit {returncode})")
    return bool(reasons), reasons


def summary(tool, parsed, returncode=0):
    """The markdown the GPU check's record holds for one tool."""
    failed, reasons = judge(parsed, returncode)
    findings = parsed["findings"]
    own = [f for f in findings if f.own]
    vendor = [f for f in findings if not f.own and f.kernels]
    lines = [f"- {tool}: {'FAILED' if failed else 'passed'}"
             + (f" ({'; '.join(reasons)})" if reasons else "")]
    lines.append(f"- in bwdconv's kernels: {len(own)} finding(s)"
                 + (f", {sum(f.count for f in own)} hazard(s)/error(s)" if own else ""))
    for f in own[:20]:
        lines.append(f"  - {f.kind} {f.severity}: {f.what} in {', '.join(f.kernels) or 'host'}")
    per_kernel = collections.Counter()
    reports = collections.Counter()
    for f in vendor:
        for kernel in f.kernels:
            per_kernel[(f.kind, kernel)] += f.count
            reports[(f.kind, kernel)] += 1
    api = [f for f in findings if f.kind == "api" and not f.own]
    lines.append(f"- in vendor kernels (not failures): {len(vendor)} report(s), "
                 f"{sum(f.count for f in vendor)} hazard(s)/error(s)")
    for (kind, kernel), count in per_kernel.most_common(20):
        lines.append(f"  - {kind}: {count} in {reports[(kind, kernel)]} report(s): "
                     f"`{short(kernel)}`")
    if api:
        lines.append("- API errors outside bwdconv (not failures): "
                     + ", ".join(f"{k} x{n}" for k, n in
                                 collections.Counter(f.what for f in api).items()))
    for text in parsed["unattributed"][:5]:
        lines.append("  - unattributed: " + text.splitlines()[0])
    for line in parsed["summaries"]:
        lines.append(f"- sanitizer: {line}")
    return "\n".join(lines), failed


def short(name, width=160):
    return name if len(name) <= width else name[:width] + "..."


def sanitizer_command(sanitizer, args):
    """compute-sanitizer's command line: the tool, --sanitizer-args, the program."""
    return [sanitizer, "--tool", args.tool, *args.sanitizer_args, *args.command]


def run(args):
    sanitizer = (args.sanitizer or shutil.which("compute-sanitizer")
                 or "/usr/local/cuda/bin/compute-sanitizer")
    if not os.access(sanitizer, os.X_OK):
        print(f"compute-sanitizer not found ({sanitizer}): nothing checked")
        return 1
    command = sanitizer_command(sanitizer, args)
    print("== " + " ".join(command), flush=True)
    # Its own process group: the sanitizer and the program under it stop together.
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, errors="replace", start_new_session=True)
    stopped = threading.Event()

    def signal_group(number):
        try:
            os.killpg(process.pid, number)
        except ProcessLookupError:
            pass

    def stop():  # past --seconds: the findings so far still get read and written
        stopped.set()
        signal_group(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            signal_group(signal.SIGKILL)

    if args.seconds is None and os.environ.get("BWDCONV_STEP_SECONDS"):
        # gpu_check.sh's limit for the step, less the time to stop and write.
        args.seconds = max(1.0, float(os.environ["BWDCONV_STEP_SECONDS"]) - 15)
    timer = threading.Timer(args.seconds, stop) if args.seconds else None
    if timer:
        timer.start()
    captured = []
    for line in process.stdout:
        sys.stdout.write(line)
        captured.append(line)
    returncode = process.wait()
    if timer:
        timer.cancel()
    text, failed = summary(args.tool, parse("".join(captured)), returncode)
    if stopped.is_set():
        text = (f"- {args.tool}: INCOMPLETE: stopped after {args.seconds:g} s; what it had found "
                f"by then:\n" + text)
        failed = True
    print(text)
    if args.summary:
        with open(args.summary, "w") as f:
            f.write(text + "\n")
    return 1 if failed else 0


def parse_arguments(argv=None):
    """The command line's arguments; `run`'s command without its leading --."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    runner = sub.add_parser("run", help="run a command under compute-sanitizer and judge it")
    runner.add_argument("--tool", required=True, choices=["memcheck", "racecheck", "initcheck",
                                                          "synccheck"])
    runner.add_argument("--sanitizer")
    runner.add_argument("--sanitizer-args", nargs="*", default=[])
    runner.add_argument("--summary")
    runner.add_argument("--seconds", type=float, default=None,
                        help="stop the run after this long, still judging what it printed "
                             "(default: BWDCONV_STEP_SECONDS less 15, else no limit)")
    runner.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    return args


def main(argv=None):
    return run(parse_arguments(argv))


if __name__ == "__main__":
    sys.exit(main())
