"""kolo: collective communication for distributed training (docs/python.md).

The communicator-level API over Python buffers (numpy arrays, bytearray, memoryview):

    import numpy as np, kolo
    comm = kolo.Communicator.init()          # under kolorun, mpirun, torchrun or Slurm
    x = np.full(4, comm.rank, dtype=np.float32)
    comm.allreduce(x, x, kolo.ReduceOp.SUM)  # in place

The Horovod-style engine is kolo.Engine; PyTorch users import kolo.torch (Horovod's API).
"""
from kolo._core import (Communicator, Compression, DType, Engine, Handle, ReduceOp,
                        SharedBuffer, __version__, build_info, dtype_name, dtype_size)
from kolo.errors import (AuthError, HorovodInternalError, InternalError, InvalidArgumentError,
                         IoError, KoloError, MismatchError, PeerLostError, TimeoutError)

__all__ = [
    "Communicator", "Compression", "DType", "Engine", "Handle", "ReduceOp", "SharedBuffer",
    "__version__",
    "build_info", "dtype_name", "dtype_size", "AuthError", "HorovodInternalError",
    "InternalError", "InvalidArgumentError", "IoError", "KoloError", "MismatchError",
    "PeerLostError", "TimeoutError",
]
