"""pytest setup of kolo.torch's tests: every rank of a kolorun job runs the same tests in the same
order (their collectives meet), with one engine for the whole session.

Run: build/tools/kolorun -np 2 /usr/bin/python3 -m pytest -x -q tests/python
     (PYTHONPATH=build/python; ctest runs it as python_torch_np2 and python_torch_np3).
"""
import pytest
import torch

import kolo.torch as hvd

# The dtypes kolo's core reduces, and the ones it refuses for now.
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8, torch.int8, torch.int16]
UNSUPPORTED = [torch.bool, torch.complex64]


@pytest.fixture(scope="session", autouse=True)
def kolo_job():
    hvd.init()
    yield
    hvd.barrier()  # nobody shuts down while a peer still runs a collective
    hvd.shutdown()
