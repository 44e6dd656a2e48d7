"""kolo.torch: Horovod's PyTorch API (horovod.torch) on kolo's engine, for CPU tensors.

A Horovod training script runs unchanged after `import kolo.torch as hvd` (not an elastic one:
kolo.torch.elastic only names Horovod's elastic API, and refuses it when used); start it with
`kolorun -np N python3 train.py` (or mpirun, torchrun, Slurm). See docs/python.md for the list
and for where kolo differs from Horovod. kolo.torch.distributed (imported here when built) is
torch.distributed's "kolo" backend, for DistributedDataParallel.
"""
import importlib.util

import torch as _torch

from kolo.errors import (HorovodInternalError, InvalidArgumentError, KoloError, MismatchError,
                         PeerLostError)
# The process calls, process sets, reduction ops and collectives: Horovod's mpi_ops module.
from kolo.torch import elastic, mpi_ops  # noqa: F401 (hvd.elastic.run, Horovod's module path)
from kolo.torch.mpi_ops import *  # noqa: F401,F403 (its __all__)
from kolo.torch.compression import Compression
from kolo.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                  broadcast_parameters)
from kolo.torch.optimizer import DistributedOptimizer
from kolo.torch.sync_batch_norm import SyncBatchNorm
from kolo.torch.elastic import HostsUpdatedInterrupt

# torch.distributed's "kolo" backend, when kolo was built with libtorch (KOLO_WITH_TORCH) and
# this torch has torch.distributed.
if importlib.util.find_spec("kolo._c10d") is not None and _torch.distributed.is_available():
    from kolo.torch import distributed  # noqa: F401 (registers the backend)

__all__ = [
    # errors
    "HorovodInternalError", "HostsUpdatedInterrupt", "InvalidArgumentError", "KoloError",
    "MismatchError", "PeerLostError",
    "Compression",
    # functions, optimizer, layers
    "allgather_object", "broadcast_object", "broadcast_optimizer_state", "broadcast_parameters",
    "DistributedOptimizer", "SyncBatchNorm",
    # modules: elastic (names only, not supported), mpi_ops (Horovod's module path)
    "elastic", "mpi_ops",
] + mpi_ops.__all__
