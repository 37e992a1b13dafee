python3 -m bwdconv.bench.models --dtype bfloat16
