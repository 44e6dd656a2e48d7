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


def _kolo_store(timeout):
    """A torch TCPStore that every rank of kolo's job reaches: rank 0 listens on a port of the
    system's choosing and tells the others through kolo's job communicator."""
    from kolo.torch.basics import _world
    world = _world()
    if world.size == 1:
        return dist.HashStore(), world
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
    return store, world


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
    if not isinstance(timeout, datetime.timedelta):
        raise TypeError("timeout must be a datetime.timedelta, not %s" % type(timeout).__name__)
    explicit = "init_method" in kwargs or "store" in kwargs
    if explicit or ("MASTER_ADDR" in os.environ and "RANK" in os.environ):
        return dist.init_process_group(backend, timeout=timeout, **kwargs)
    store, world = _kolo_store(timeout)
    for name, value in (("rank", world.rank), ("world_size", world.size)):
        if kwargs.setdefault(name, value) != value:
            raise ValueError("init_process_group(%s=%r), but kolo's launch says %r" % (
                name, kwargs[name], value))
    return dist.init_process_group(backend, store=store, timeout=timeout, **kwargs)
