python3 scripts/gpu_sanitizer.py run --tool memcheck --summary benchmarks/results/gpu-2026-11-28-h200/sanitizer_memcheck.md -- python3 scripts/gpu_small_cases.py --mismatches-pass
