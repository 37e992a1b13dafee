env BWDCONV_CACHE_DIR=benchmarks/results/gpu-2026-11-28-h200-more/cache python3 -m bwdconv.tune --suite seeds
