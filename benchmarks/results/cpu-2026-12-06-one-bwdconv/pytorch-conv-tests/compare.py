"""Compares JUnit XML results test by test: each test's outcome (passed,
failure, error, skipped) and its full message, the first file against each
of the others.

    python compare.py none.xml functional.xml aten.xml
"""
import collections
import sys
import xml.etree.ElementTree as ElementTree


def outcomes(path):
    """{class::name: (outcome, message)}."""
    found = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome, message = child.tag, child.get("message") or ""
                break
        found[f"{case.get('classname')}::{case.get('name')}"] = (outcome, message)
    return found


def main(baseline_path, *others):
    baseline = outcomes(baseline_path)
    counts = collections.Counter(outcome for outcome, _ in baseline.values())
    print(f"{baseline_path}: {len(baseline)} tests, {dict(counts)}")
    for path in others:
        other = outcomes(path)
        names = sorted(set(baseline) | set(other))
        differ = [n for n in names if baseline.get(n) != other.get(n)]
        print(f"{path}: {len(other)} tests, {len(differ)} differ in outcome or message")
        for name in differ:
            print(f"  {name}: {baseline.get(name)} -> {other.get(name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
