python3 scripts/gpu_random_cases.py --cases 10000 --seconds 70 --require-served --json benchmarks/results/gpu-2026-11-28-h200/random.json --report benchmarks/results/gpu-2026-11-28-h200/random.md
