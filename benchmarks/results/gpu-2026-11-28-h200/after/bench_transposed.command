python3 -m bwdconv.bench --suite transposed --check --iter 20 --cudnn-benchmark on --out benchmarks/results/gpu-2026-11-28-h200-after/bench_transposed
