"""Compares pytest junit XML files test by test: the first is the baseline;
for each other file, prints how many tests it holds and every test whose
outcome (passed, failure, error, skipped) differs from the baseline's."""
import sys, xml.etree.ElementTree as ET
def outcomes(path):
    r = {}
    for tc in ET.parse(path).getroot().iter('testcase'):
        name = tc.get('classname') + '::' + tc.get('name')
        kind = 'passed'
        for child in tc:
            if child.tag in ('failure', 'error', 'skipped'):
                kind = child.tag + (':' + (child.get('message') or '')[:150] if child.tag != 'skipped' else '')
                break
        r[name] = kind
    return r
base = outcomes(sys.argv[1])
for other in sys.argv[2:]:
    o = outcomes(other)
    diffs = [(n, base.get(n), o.get(n)) for n in sorted(set(base) | set(o)) if base.get(n, '').split(':')[0] != o.get(n, '').split(':')[0]]
    print(other, len(o), 'tests,', len(diffs), 'differ')
    for d in diffs: print('  ', d)
