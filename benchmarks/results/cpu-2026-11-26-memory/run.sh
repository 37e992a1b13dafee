#!/bin/bash
# Every suite, dtype and layout of this record: one bench run each at 1/SCALE
# (first argument, default 8), one timed call (the memory is the point),
# into runs/scale<SCALE>/. Waits while another measurement holds
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
      while [ -e /tmp/bwdconv-timing.lock ]; do sleep 20; done
      python -m bwdconv.bench --suite suites/${suite}_$dtype.txt --layout $layout \
          --scale $scale --iter 1 --warmup 1 --device cpu --out $out > $out.log 2>&1
    done
  done
done
