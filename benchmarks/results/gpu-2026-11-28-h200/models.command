python3 -m bwdconv.bench.models
