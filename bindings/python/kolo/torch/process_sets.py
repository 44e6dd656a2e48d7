"""Process sets as Horovod has them: ProcessSet, global_process_set, add_process_set and
remove_process_set over the engine's process sets (each with its own communicator).

remove_process_set() is collective (every rank removes the same sets in the same order): it
retires the Python object (later ops on it raise ValueError) and the engine frees the set's
communicator.
"""
from kolo.torch import basics
from kolo.torch.arguments import ranks_arg


class ProcessSet:
    """A subset of the ranks; collectives given `process_set=` run among them only.

    `ranks` are ranks of the job (sorted); `process_set_id` is None until the set is registered
    by init(process_sets=[...]) or add_process_set()."""

    def __init__(self, ranks_or_comm):
        self.ranks = ranks_arg(ranks_or_comm, "ProcessSet")
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


def _check_init_sets(process_sets):
    """init(process_sets=...): None, "dynamic" or a list of ProcessSet, checked before the engine
    starts."""
    if process_sets is None or (isinstance(process_sets, str) and process_sets == "dynamic"):
        return
    if not isinstance(process_sets, (list, tuple)) or not all(
            isinstance(ps, ProcessSet) for ps in process_sets):
        raise TypeError("init(process_sets=...) takes a list of ProcessSet or \"dynamic\", got %r"
                        % (process_sets,))


def _setup(world_size, process_sets):
    """init(): the global set spans the engine's communicator; `process_sets` are added (init
    stops the engine again if one is refused: refusals reach every rank)."""
    global_process_set.ranks = list(range(world_size))
    global_process_set.process_set_id = 0
    _registered.clear()
    _registered[0] = global_process_set
    if process_sets is None or isinstance(process_sets, str):
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
        raise TypeError("process_set must be a ProcessSet, not %s" % type(process_set).__name__)
    if process_set.process_set_id is None or process_set.process_set_id not in _registered:
        raise ValueError("%s is not registered (add_process_set) or was removed" % process_set)
    return process_set.process_set_id


def _refusal(process_set):
    """add_process_set's argument as a ProcessSet, or the error that refuses it here."""
    try:
        if not isinstance(process_set, ProcessSet):
            process_set = ProcessSet(process_set)
    except (TypeError, ValueError) as error:
        return None, error
    if process_set.process_set_id is not None:
        return None, ValueError("%s is already registered" % process_set)
    n = basics.size()
    if not process_set.ranks or process_set.ranks[0] < 0 or process_set.ranks[-1] >= n:
        return None, ValueError("process set ranks %s are not ranks of a job of %d" %
                                (process_set.ranks, n))
    for other in _registered.values():
        if other.ranks == process_set.ranks:
            return None, ValueError("a process set with ranks %s exists already: %s" %
                                    (process_set.ranks, other))
    return process_set, None


def add_process_set(process_set):
    """Registers a ProcessSet (or a list of ranks) and returns it. Collective: every rank of the
    job calls it, in the same order, with the same ranks. A call refused on one rank is refused
    on every rank (each learns which rank refused and why), and no set is added."""
    engine = basics._engine()
    process_set, refusal = _refusal(process_set)
    from kolo.torch.functions import allgather_object  # functions imports this module
    verdicts = allgather_object(None if refusal is None else
                                "%s: %s" % (type(refusal).__name__, refusal))
    if refusal is not None:
        raise refusal
    refused = [(q, why) for q, why in enumerate(verdicts) if why is not None]
    if refused:
        raise ValueError("add_process_set(%s): rank %d refused its call (%s); no set is added" %
                         (process_set.ranks, refused[0][0], refused[0][1]))
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
