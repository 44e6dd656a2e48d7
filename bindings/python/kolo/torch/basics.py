"""kolo.torch's process state: init and shutdown, the topology queries and build facts Horovod
answers, and the timeline. One engine per process, created by init() on the job's communicator.

The communicator (the job's rendezvous) is made once per process and kept until exit;
shutdown() stops the engine only, so init() may follow shutdown() as in Horovod.
"""
import atexit

from kolo import _core
from kolo.errors import InvalidArgumentError, IoError
from kolo.torch import horovod_env
from kolo.torch.arguments import ranks_arg


class _State:
    world = None   # kolo.Communicator of the whole job: made once per process
    comm = None    # the communicator the engine runs on (world, or the ranks of init(comm=...))
    engine = None  # kolo.Engine while initialized


_state = _State()


def _world():
    if _state.world is None:
        _state.world = _core.Communicator.init()
    return _state.world


def _resolve_comm(comm):
    """The communicator init(comm=...) asks for: the job, a kolo.Communicator, or a list of ranks
    of the job (collective: every rank of the job passes the same list)."""
    if comm is None or isinstance(comm, _core.Communicator):
        return comm if comm is not None else _world()
    if not isinstance(comm, (list, tuple, range)):
        raise TypeError("init(comm=...) takes a list of ranks or a kolo.Communicator, not %s "
                        "(mpi4py communicators are not supported)" % type(comm).__name__)
    ranks = ranks_arg(comm, "init(comm=...)")
    world = _world()
    if len(set(ranks)) != len(ranks) or not ranks or ranks[0] < 0 or ranks[-1] >= world.size:
        raise ValueError("init(comm=%s): expected distinct ranks in [0, %d)" % (list(comm),
                                                                                world.size))
    if ranks == list(range(world.size)):
        return world
    member = world.rank in ranks
    sub = world.split(0 if member else -1, world.rank)
    if not member:
        raise ValueError("rank %d is not in init(comm=%s)" % (world.rank, ranks))
    return sub


def init(comm=None, process_sets=None):
    """Starts kolo's engine (collective). `comm`: None (every rank of the job), a list of job
    ranks, or a kolo.Communicator. `process_sets`: ProcessSet objects to register now, or
    "dynamic" (kolo always allows add_process_set later). Horovod's HOROVOD_* settings are
    honoured where kolo has an equivalent (kolo/torch/horovod_env.py)."""
    if _state.engine is not None:
        return
    from kolo.torch import ops, process_sets as sets
    sets._check_init_sets(process_sets)
    horovod_env.apply()
    try:
        _core.check_engine_settings()  # each rank names a bad setting, before any waits
        _state.comm = _resolve_comm(comm)
        _state.engine = _core.Engine(_state.comm)  # opens KOLO_TIMELINE's file
    except (InvalidArgumentError, IoError) as error:
        explained = horovod_env.explain(error)
        if explained is error:
            raise
        raise explained from error
    ops._reset()
    try:
        sets._setup(_state.comm.size, process_sets)
    except BaseException:
        shutdown()  # all or nothing: a retry of init() starts afresh
        raise


def shutdown():
    """Stops the engine: pending ops fail on every rank. init() may be called again."""
    engine, _state.engine = _state.engine, None
    if engine is not None:
        from kolo.torch import process_sets as sets
        sets._teardown()
        engine.close()


atexit.register(shutdown)


def is_initialized():
    return _state.engine is not None


def _engine():
    if _state.engine is None:
        raise ValueError("kolo has not been initialized; use hvd.init().")
    return _state.engine


def _comm():
    _engine()
    return _state.comm


def size():
    """Number of ranks."""
    return _comm().size


def rank():
    return _comm().rank


def local_size():
    """Ranks on this host."""
    return _comm().local_size


def local_rank():
    return _comm().local_rank


def cross_size():
    """Hosts with a rank of this rank's local rank."""
    return _comm().cross_size


def cross_rank():
    return _comm().cross_rank


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    return size() == local_size() * cross_size()


def start_timeline(file_path, mark_cycles=False):
    """Writes a Chrome trace of the engine's ops (rank r > 0 writes file_path.rank<r>, or use %r
    in the path). mark_cycles is accepted for Horovod's signature; kolo does not mark cycles."""
    del mark_cycles
    _engine().start_timeline(str(file_path))


def stop_timeline():
    _engine().stop_timeline()


# Build and runtime facts, answered for kolo (which runs its own collectives, with an MPI
# transport when built with MPI and started by mpirun).
def mpi_built():
    return bool(_core.build_info["mpi"])


def mpi_enabled():
    """True when the collectives run over the MPI transport."""
    return is_initialized() and _state.comm.transport == "mpi"


def mpi_threads_supported():
    """True when the MPI transport is in use: kolo starts MPI with MPI_THREAD_MULTIPLE requested
    (at least MPI_THREAD_SERIALIZED granted) and serializes its own calls."""
    _engine()
    return mpi_enabled()


def gloo_built():
    return False


def gloo_enabled():
    return False


def nccl_built():
    return 0


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False
