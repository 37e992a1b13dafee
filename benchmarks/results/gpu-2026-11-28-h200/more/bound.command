python3 -m bwdconv.bench.bound --scale 1 --iter 10
