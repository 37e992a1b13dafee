python3 -m bwdconv.bench --suite seeds --layout channels_last --check --iter 20 --cudnn-benchmark on --out benchmarks/results/gpu-2026-11-28-h200-more/bench_channels_last
