python3 -m bwdconv.bench.overhead --samples 15 --json benchmarks/results/gpu-2026-11-28-h200-more/overhead.json
