"""Process sets as Horovod has them: ProcessSet, global_process_set, add_process_set and
remove_process_set over the engine's process sets (each with its own communicator).

remove_process_set() is collective (every rank removes the same sets in the same order): it
retires the Python object (later ops on it raise ValueError) and the engine frees the set's
communicator.
"""
from kolo.torch import basics


class ProcessSet:
    """A subset of the ranks; collectives given `process_set=` run among them only.

    `ranks` are ranks of the job (sorted); `process_set_id` is None until the set is registered
    by init(process_sets=[...]) or add_process_set()."""

    def __init__(self, ranks_or_comm):
        if not isinstance(ranks_or_comm, (list, tuple, range)):
            raise TypeError("kolo process sets are lists of ranks, not %s (mpi4py communicators "
                            "are not supported)" % type(ranks_or_comm).__name__)
        self.ranks = sorted(int(r) for r in ranks_or_comm)
        if len(set(self.ranks)) != len(self.ranks):
            raise ValueError("process set ranks %s repeat a rank" % list(ranks_or_comm))
        self.process_set_id = None
        self.mpi_comm = None

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """Number of ranks in the set; None while unregistered."""
        return None if self.process_set_id is None else len(self.ranks)

    def rank(self):
        """This rank's index in the set, -1 if not a member; None while unregistered."""
        if self.process_set_id is None:
            return None
        me = basics.rank()
        return self.ranks.index(me) if me in self.ranks else -1

    def included(self):
        """Whether this rank is a member; None while unregistered."""
        return None if self.process_set_id is None else basics.rank() in self.ranks

    def _root_index(self, root_rank):
        """The set-relative index of job rank `root_rank` (broadcast roots are job ranks)."""
        if root_rank not in self.ranks:
            raise ValueError("root_rank %d is not in %s" % (root_rank, self))
        return self.ranks.index(root_rank)

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (self.process_set_id, self.ranks)

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0

_registered = {}  # id -> ProcessSet, the global set included


def _setup(world_size, process_sets):
    """init(): the global set spans the engine's communicator; `process_sets` are added."""
    global_process_set.ranks = list(range(world_size))
    global_process_set.process_set_id = 0
    _registered.clear()
    _registered[0] = global_process_set
    if process_sets is None or process_sets == "dynamic":
        return
    for ps in process_sets:
        add_process_set(ps)


def _teardown():
    for ps in list(_registered.values()):
        if ps is not global_process_set:
            ps._invalidate()
    _registered.clear()


def _id_of(process_set):
    """The engine's id of a registered set; ValueError otherwise."""
    basics._engine()
    if not isinstance(process_set, ProcessSet):
        raise ValueError("process_set must be a ProcessSet, not %s" % type(process_set).__name__)
    if process_set.process_set_id is None or process_set.process_set_id not in _registered:
        raise ValueError("%s is not registered (add_process_set) or was removed" % process_set)
    return process_set.process_set_id


def add_process_set(process_set):
    """Registers a ProcessSet (or a list of ranks) and returns it. Collective: every rank of the
    job calls it, in the same order, with the same ranks."""
    engine = basics._engine()
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError("%s is already registered" % process_set)
    n = basics.size()
    if not process_set.ranks or process_set.ranks[0] < 0 or process_set.ranks[-1] >= n:
        raise ValueError("process set ranks %s are not ranks of a job of %d" %
                         (process_set.ranks, n))
    for other in _registered.values():
        if other.ranks == process_set.ranks:
            raise ValueError("a process set with ranks %s exists already: %s" %
                             (process_set.ranks, other))
    process_set.process_set_id = engine.add_process_set(process_set.ranks)
    _registered[process_set.process_set_id] = process_set
    return process_set


def remove_process_set(process_set):
    """Removes a process set: collective, every rank removes the same sets in the same order.
    Later ops on it raise ValueError, and the engine frees its communicator. Returns True. The
    global set cannot be removed."""
    set_id = _id_of(process_set)
    if set_id == 0:
        raise ValueError("the global process set cannot be removed")
    basics._engine().remove_process_set(set_id)
    del _registered[set_id]
    process_set._invalidate()
    return True
