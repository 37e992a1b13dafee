#!/bin/bash
# Every suite, dtype and layout of this record: one bench run each at 1/SCALE
# (first argument, default 8), one timed call (the memory is the point),
# into runs/scale<SCALE>/, at the lowest priority. Only results.json is kept,
# cut to what summary.py and a reader of the peaks need: meta, and per row
# the index, case, direction, strategy, plan, tuned choice, status,
# peak_bytes and result_bytes, one row a line. The times (meaningless on a
# shared machine), the MIOpenDriver line (suites/ holds it), the log, CSV,
# markdown and PNG are dropped. Waits while another measurement holds
# /tmp/bwdconv-timing.lock.
set -e
cd "$(dirname "$0")"
scale=${1:-8}
export BWDCONV_CACHE_DIR=$PWD/cache BWDCONV_AUTOTUNE_KEY_SECONDS=0.3
mkdir -p runs/scale$scale
for suite in seeds resnet50 r3d18; do
  for dtype in float32 bfloat16; do
    for layout in channels_first channels_last; do
      out=runs/scale$scale/$suite-$dtype-$layout
      [ -e $out/results.json ] && continue
      while [ -e /tmp/bwdconv-timing.lock ]; do sleep 10; done
      nice -n 19 python -m bwdconv.bench --suite suites/${suite}_$dtype.txt --layout $layout \
          --scale $scale --iter 1 --warmup 1 --device cpu --out $out > $out.log 2>&1
      python - $out/results.json <<'EOF'
import json, sys
keep = ("index", "case", "direction", "strategy", "plan", "tuned", "status", "peak_bytes",
        "result_bytes")
data = json.load(open(sys.argv[1]))
rows = [json.dumps({k: row[k] for k in keep if k in row}) for row in data["results"]]
with open(sys.argv[1], "w") as f:
    f.write('{"meta": ' + json.dumps(data["meta"]) + ',\n "results": [\n  '
            + ',\n  '.join(rows) + '\n]}\n')
EOF
      find $out -type f ! -name results.json -delete; rm -f $out.log
    done
  done
done
