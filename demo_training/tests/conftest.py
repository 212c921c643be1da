"""The trainer's tests run offline on one thread, like the harness's (tests/conftest.py): the
models are small, and two test workers share two cores."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
