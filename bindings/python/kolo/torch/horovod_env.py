"""Horovod's environment settings, honoured by kolo.torch's init(): a job tuned for Horovod
(HOROVOD_FUSION_THRESHOLD=..., HOROVOD_TIMELINE=...) keeps its settings after
`import kolo.torch as hvd`. Each one that has a kolo equivalent is handed to kolo under kolo's
name (docs/python.md lists them); kolo's own variable wins where both are set. A Horovod setting
kolo has no use for is named in a warning, so that nobody believes it took effect.
"""
import os
import warnings

from kolo.errors import InvalidArgumentError

# Horovod's variable -> kolo's, with the same unit (bytes, milliseconds, seconds, entries).
_SAME_MEANING = {
    "HOROVOD_FUSION_THRESHOLD": "KOLO_FUSION_THRESHOLD",
    "HOROVOD_CYCLE_TIME": "KOLO_CYCLE_TIME_MS",
    "HOROVOD_CACHE_CAPACITY": "KOLO_CACHE_CAPACITY",
    "HOROVOD_STALL_CHECK_TIME_SECONDS": "KOLO_STALL_CHECK_SECONDS",
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "KOLO_STALL_SHUTDOWN_SECONDS",
    "HOROVOD_GLOO_TIMEOUT_SECONDS": "KOLO_TIMEOUT_SECONDS",
}

# Horovod's log levels (any case) -> kolo's.
_LOG_LEVELS = {"trace": "trace", "debug": "debug", "info": "info", "warning": "warning",
               "error": "error", "fatal": "error"}

# Horovod settings without a kolo equivalent, and why.
_IGNORED = {
    "HOROVOD_AUTOTUNE": "kolo has no autotuner",
    "HOROVOD_HIERARCHICAL_ALLREDUCE": "kolo picks its hierarchical allreduce itself where ranks "
                                      "share hosts (KOLO_ALGORITHM=hierarchical forces it)",
    "HOROVOD_HIERARCHICAL_ALLGATHER": "kolo picks its hierarchical allgather itself where ranks "
                                      "share hosts",
    "HOROVOD_TIMELINE_MARK_CYCLES": "kolo's timeline does not mark cycles",
    "HOROVOD_DISABLE_GROUP_FUSION": "kolo fuses a group's tensors as it fuses others",
    "HOROVOD_MPI_THREADS_DISABLE": "kolo starts MPI itself when its mpi transport is used",
    "HOROVOD_CPU_OPERATIONS": "kolo runs its own collectives (KOLO_TRANSPORT picks the "
                              "transport)",
    "HOROVOD_CONTROLLER": "kolo's engine negotiates over its own communicator",
}

# kolo variable -> (Horovod variable, value) that the last init() set from Horovod's settings.
_applied = {}


# Booleans as kolo's C++ reads them (env::get_bool), in any case.
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

# Text by which kolo's messages about a setting are known: its name, and for the timeline the
# "timeline: " prefix of the errors opening or writing its file (they name the file only).
_MESSAGE_MARKS = {"KOLO_TIMELINE": ("KOLO_TIMELINE", "timeline: ")}


def _refuse(name, expected):
    """The error for a Horovod variable whose value kolo cannot read (raised on every rank, as
    each reads the same environment)."""
    return InvalidArgumentError("%s=%r is not accepted; expected %s" % (
        name, os.environ[name], expected))


def _stall_check(value):
    """HOROVOD_STALL_CHECK_DISABLE=1 turns the stall warnings off: kolo's longest check time.
    None where it leaves them on (a false or empty value)."""
    value = value.strip().lower()
    if value in _TRUE:
        return "1000000000"
    if value in _FALSE or not value:
        return None
    raise _refuse("HOROVOD_STALL_CHECK_DISABLE", "one of " + ", ".join(
        "%s, %s" % pair for pair in zip(_TRUE, _FALSE)))


def _wanted():
    """kolo variable -> (Horovod variable, value) for the Horovod settings in the environment."""
    env = os.environ
    wanted = {kolo: (hvd, env[hvd]) for hvd, kolo in _SAME_MEANING.items() if hvd in env}
    timeline = env.get("HOROVOD_TIMELINE")
    if timeline and timeline != "DYNAMIC":  # DYNAMIC: only start_timeline() records
        wanted["KOLO_TIMELINE"] = ("HOROVOD_TIMELINE", timeline)
    if "HOROVOD_STALL_CHECK_DISABLE" in env:
        value = _stall_check(env["HOROVOD_STALL_CHECK_DISABLE"])
        if value is not None:
            wanted["KOLO_STALL_CHECK_SECONDS"] = ("HOROVOD_STALL_CHECK_DISABLE", value)
    if "HOROVOD_LOG_LEVEL" in env:
        level = _LOG_LEVELS.get(env["HOROVOD_LOG_LEVEL"].strip().lower())
        if level is None:
            raise _refuse("HOROVOD_LOG_LEVEL", "one of TRACE, DEBUG, INFO, WARNING, ERROR, FATAL")
        wanted["KOLO_LOG_LEVEL"] = ("HOROVOD_LOG_LEVEL", level)
    return wanted


def apply():
    """Sets kolo's variables from Horovod's before the engine reads them. A kolo variable this
    module set at an earlier init() is recomputed (the Horovod one may have changed); one the
    user set is kept, with a warning where a Horovod setting disagrees with it. An empty kolo
    variable counts as unset, as in kolo's C++ (env::get)."""
    for kolo, (_, value) in _applied.items():
        if os.environ.get(kolo) == value:
            del os.environ[kolo]
    _applied.clear()
    for kolo, (hvd, value) in _wanted().items():
        mine = os.environ.get(kolo)
        if not mine:
            os.environ[kolo] = value
            _applied[kolo] = (hvd, value)
        elif mine != value:
            warnings.warn("%s=%r is ignored: %s=%r is set and kolo's own setting wins" % (
                hvd, os.environ[hvd], kolo, mine), stacklevel=3)
    ignored = ["%s (%s)" % (name, why) for name, why in _IGNORED.items()
               if os.environ.get(name, "") not in ("", "0")]
    if ignored:
        warnings.warn("kolo.torch ignores these Horovod settings: " + "; ".join(ignored),
                      stacklevel=3)


def explain(error):
    """`error` (a KoloError raised while kolo read its settings or opened the timeline) with the
    Horovod variable named, where the setting came from one: a new error of the same class,
    else `error` itself."""
    text = str(error)
    for kolo, (hvd, value) in _applied.items():
        if any(mark in text for mark in _MESSAGE_MARKS.get(kolo, (kolo,))):
            return type(error)("%s=%r (kolo's %s): %s" % (hvd, os.environ.get(hvd, value), kolo,
                                                          text))
    return error
