python3 -m bwdconv.bench.kernels --suite seeds --layout channels_last
