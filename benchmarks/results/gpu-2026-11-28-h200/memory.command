python3 scripts/gpu_memory_probe.py --json benchmarks/results/gpu-2026-11-28-h200/memory.json
