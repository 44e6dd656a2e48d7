"""kolo.torch.distributed: torch.distributed's "kolo" backend (the extension kolo._c10d).

Importing it (`import kolo.torch` does) registers the backend, so that
`torch.distributed.init_process_group("kolo")`, `new_group(backend="kolo")` and
DistributedDataParallel run over kolo's collectives:

    import torch.distributed as dist, kolo.torch.distributed as kd
    kd.init_process_group()          # under kolorun, mpirun, Slurm or torchrun
    model = torch.nn.parallel.DistributedDataParallel(model)

Each process group builds a kolo Communicator on the store torch gives it, so every
init_method torch knows works too (env://, tcp://, file://, store=...).
"""
import datetime
import os
import socket

import torch.distributed as dist

from kolo import _c10d

BACKEND = "kolo"
ProcessGroupKolo = _c10d.ProcessGroupKolo

# torch calls the creator as (store, rank, size, timeout): ProcessGroupKolo's constructor.
if not hasattr(dist.Backend, BACKEND.upper()):
    dist.Backend.register_backend(BACKEND, ProcessGroupKolo)

_ADDRESS_BYTES = 256  # rank 0's "host:port", broadcast as a fixed-size buffer
_MAX_TIMEOUT_S = 604800  # KOLO_TIMEOUT_SECONDS's largest value (a week)


def _kolo_store(world, timeout):
    """A torch TCPStore that every rank of kolo's job reaches: rank 0 listens on a port of the
    system's choosing and tells the others through kolo's job communicator."""
    if world.size == 1:
        return dist.HashStore()
    address = bytearray(_ADDRESS_BYTES)
    store = None
    if world.rank == 0:
        # kolorun gives its address; elsewhere (mpirun, Slurm) the ranks on other hosts need
        # this host's name.
        host = os.environ.get("KOLO_ADDR") or (
            "127.0.0.1" if world.cross_size == 1 else socket.gethostname())
        store = dist.TCPStore(host, 0, world.size, True, timeout, wait_for_workers=False)
        text = ("%s:%d" % (host, store.port)).encode()
        address[:len(text)] = text
    world.broadcast(address, 0)
    if world.rank != 0:
        host, port = bytes(address).rstrip(b"\0").decode().rsplit(":", 1)
        store = dist.TCPStore(host, int(port), world.size, False, timeout)
    return store


def init_process_group(backend=BACKEND, timeout=None, **kwargs):
    """torch.distributed.init_process_group, with kolo's launchers as a rendezvous.

    With init_method= or store= given, or torch's variables set (MASTER_ADDR and RANK, as
    torchrun does), this is torch's init_process_group. Otherwise (kolorun, mpirun, Slurm) rank
    and size come from kolo's launch, and the store is a TCPStore hosted by rank 0 on a free
    port, announced through kolo's job communicator as KOLO_ADDR (kolorun's address), else
    127.0.0.1 on one host or rank 0's host name across hosts.
    `timeout` (a timedelta; torch's default 30 minutes) is also how long a kolo collective may
    wait without progress before it fails."""
    if timeout is None:
        timeout = dist.default_pg_timeout
    _check_timeout(timeout)
    # torch refuses a second call only after the store exists, which the other ranks then lose.
    if dist.is_initialized():
        raise RuntimeError("init_process_group: the default process group is initialized "
                           "already (call destroy_process_group() first)")
    explicit = "init_method" in kwargs or "store" in kwargs
    # An empty variable counts as unset, as everywhere in kolo.
    if explicit or (os.environ.get("MASTER_ADDR") and os.environ.get("RANK")):
        return dist.init_process_group(backend, timeout=timeout, **kwargs)
    from kolo.torch.basics import _world
    world = _world()
    _check_launch_arguments(world, kwargs)
    store = _kolo_store(world, timeout)
    return dist.init_process_group(backend, store=store, timeout=timeout, **kwargs)


def _check_timeout(timeout):
    """The range of KOLO_TIMEOUT_SECONDS, checked before the store is made (torch's store failed
    with 'timed out after -5s' on rank 0 and the others lost it)."""
    if not isinstance(timeout, datetime.timedelta):
        raise TypeError("timeout must be a datetime.timedelta, not %s" % type(timeout).__name__)
    seconds = timeout.total_seconds()
    if not 0.001 <= seconds <= _MAX_TIMEOUT_S:
        raise ValueError("init_process_group: timeout of %r s is outside [0.001, %d] s (the range "
                         "of KOLO_TIMEOUT_SECONDS)" % (seconds, _MAX_TIMEOUT_S))


def _check_launch_arguments(world, kwargs):
    """rank= and world_size= must be what kolo's launch says. Collective: a rank whose argument
    differs would otherwise leave the others to lose the store; every rank raises, naming it."""
    import array
    from kolo import _core
    mine = ""
    for name, value in (("rank", world.rank), ("world_size", world.size)):
        if kwargs.setdefault(name, value) != value:
            mine = "init_process_group(%s=%r) on rank %d, but kolo's launch says %r" % (
                name, kwargs[name], world.rank, value)
    worst = array.array("q", [world.rank + 1 if mine else 0])
    world.allreduce(worst, worst, _core.ReduceOp.MAX)
    if mine:
        raise ValueError(mine)
    if worst[0]:
        raise ValueError("init_process_group: rank %d passed a rank= or world_size= that kolo's "
                         "launch does not give it (its own error names it)" % (worst[0] - 1))
