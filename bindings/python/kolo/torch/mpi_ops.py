"""kolo.torch.mpi_ops: the module path of Horovod's horovod.torch.mpi_ops, for scripts that import
from it (`from horovod.torch.mpi_ops import allreduce_async_, synchronize, Average`). The same
functions and values as kolo.torch's: the process calls, the reduction ops and the collectives.
"""
from kolo.torch.basics import (ccl_built, cross_rank, cross_size, cuda_built, ddl_built,
                               gloo_built, gloo_enabled, init, is_homogeneous, is_initialized,
                               local_rank, local_size, mpi_built, mpi_enabled,
                               mpi_threads_supported, nccl_built, rank, rocm_built, shutdown,
                               size, start_timeline, stop_timeline)
from kolo.torch.process_sets import (ProcessSet, add_process_set, global_process_set,
                                     remove_process_set)
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

__all__ = [
    # process
    "ccl_built", "cross_rank", "cross_size", "cuda_built", "ddl_built", "gloo_built",
    "gloo_enabled", "init", "is_homogeneous", "is_initialized", "local_rank", "local_size",
    "mpi_built", "mpi_enabled", "mpi_threads_supported", "nccl_built", "rank", "rocm_built",
    "shutdown", "size", "start_timeline", "stop_timeline",
    # process sets
    "ProcessSet", "add_process_set", "global_process_set", "remove_process_set",
    # reduction ops and collectives
    "Adasum", "Average", "Max", "Min", "Product", "Sum", "allgather", "allgather_async",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_", "alltoall",
    "alltoall_async", "barrier", "broadcast", "broadcast_", "broadcast_async",
    "broadcast_async_", "grouped_allgather", "grouped_allgather_async", "grouped_allreduce",
    "grouped_allreduce_", "grouped_allreduce_async", "grouped_allreduce_async_",
    "grouped_reducescatter", "grouped_reducescatter_async",
    "handle_average_backwards_compatibility", "join", "poll", "reducescatter",
    "reducescatter_async", "sparse_allreduce_async", "synchronize",
]
