python3 scripts/gpu_sanitizer.py run --tool racecheck --summary benchmarks/results/gpu-2026-11-28-h200/sanitizer_racecheck.md -- python3 scripts/gpu_small_cases.py --mismatches-pass
