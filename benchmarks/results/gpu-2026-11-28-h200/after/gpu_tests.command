python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py tests/test_errors.py
