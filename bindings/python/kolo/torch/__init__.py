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
from kolo.torch.basics import (ccl_built, cross_rank, cross_size, cuda_built, ddl_built,
                               gloo_built, gloo_enabled, init, is_homogeneous, is_initialized,
                               local_rank, local_size, mpi_built, mpi_enabled,
                               mpi_threads_supported, nccl_built, rank, rocm_built, shutdown,
                               size, start_timeline, stop_timeline)
from kolo.torch.process_sets import (ProcessSet, add_process_set, global_process_set,
                                     remove_process_set)
from kolo.torch.compression import Compression
from kolo.torch.ops import (Adasum, Average, Max, Min, Product, Sum, allgather_async,
                            allreduce_, allreduce_async, allreduce_async_, alltoall_async,
                            barrier, broadcast_, broadcast_async, broadcast_async_,
                            grouped_allgather_async, grouped_allreduce_,
                            grouped_allreduce_async, grouped_allreduce_async_,
                            grouped_reducescatter_async, handle_average_backwards_compatibility,
                            join, poll, reducescatter_async, sparse_allreduce_async,
                            synchronize)
from kolo.torch.autograd_ops import (allgather, allreduce, alltoall, broadcast,
                                     grouped_allgather, grouped_allreduce,
                                     grouped_reducescatter, reducescatter)
from kolo.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                  broadcast_parameters)
from kolo.torch.optimizer import DistributedOptimizer
from kolo.torch.sync_batch_norm import SyncBatchNorm
from kolo.torch import elastic, mpi_ops  # noqa: F401 (hvd.elastic.run, Horovod's module path)
from kolo.torch.elastic import HostsUpdatedInterrupt

# torch.distributed's "kolo" backend, when kolo was built with libtorch (KOLO_WITH_TORCH) and
# this torch has torch.distributed.
if importlib.util.find_spec("kolo._c10d") is not None and _torch.distributed.is_available():
    from kolo.torch import distributed  # noqa: F401 (registers the backend)

__all__ = [
    # errors
    "HorovodInternalError", "HostsUpdatedInterrupt", "InvalidArgumentError", "KoloError",
    "MismatchError", "PeerLostError",
    # basics
    "ccl_built", "cross_rank", "cross_size", "cuda_built", "ddl_built", "gloo_built",
    "gloo_enabled", "init", "is_homogeneous", "is_initialized", "local_rank", "local_size",
    "mpi_built", "mpi_enabled", "mpi_threads_supported", "nccl_built", "rank", "rocm_built",
    "shutdown", "size", "start_timeline", "stop_timeline",
    # process sets, compression
    "ProcessSet", "add_process_set", "global_process_set", "remove_process_set", "Compression",
    # ops
    "Adasum", "Average", "Max", "Min", "Product", "Sum", "allgather", "allgather_async",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_", "alltoall",
    "alltoall_async", "barrier", "broadcast", "broadcast_", "broadcast_async",
    "broadcast_async_", "grouped_allgather", "grouped_allgather_async", "grouped_allreduce",
    "grouped_allreduce_", "grouped_allreduce_async", "grouped_allreduce_async_",
    "grouped_reducescatter", "grouped_reducescatter_async",
    "handle_average_backwards_compatibility", "join", "poll", "reducescatter",
    "reducescatter_async", "sparse_allreduce_async", "synchronize",
    # functions, optimizer, layers
    "allgather_object", "broadcast_object", "broadcast_optimizer_state", "broadcast_parameters",
    "DistributedOptimizer", "SyncBatchNorm",
    # modules: elastic (names only, not supported), mpi_ops (Horovod's module path)
    "elastic", "mpi_ops",
]
