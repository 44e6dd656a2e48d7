"""kolo.torch.elastic: Horovod's elastic API (horovod.torch.elastic), which kolo does not support.

The names exist so that a Horovod script imports and defines its functions and classes; using
them (calling a function decorated with `run`, making a state or a sampler) raises
NotImplementedError saying what to do instead (docs/python.md#elastic). A kolo job has a fixed
world size: no worker joins or leaves while it runs.
"""
import functools

import torch.utils.data


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod raises it when workers join or leave an elastic job; kolo never does, but a
    script's `except hvd.HostsUpdatedInterrupt:` must name an exception class."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync


def _unsupported(what):
    return NotImplementedError(
        "kolo.torch.elastic.%s: elastic training (horovodrun --min-np/--max-np) is not "
        "supported by kolo; run with a fixed world size (kolorun -np N) and call the training "
        "function directly (docs/python.md#elastic)" % what)


def run(func):
    """Decorates `func` as Horovod's elastic.run does, so that the script's definitions load;
    calling the result raises NotImplementedError."""
    @functools.wraps(func)
    def refuse(*args, **kwargs):
        raise _unsupported("run")
    return refuse


class State:
    """Horovod's base of elastic states: subclassing it works, making one raises."""

    def __init__(self, *args, **kwargs):
        cls = type(self)
        raise _unsupported(cls.__name__ if cls.__module__ == __name__ else
                           "State (subclassed by %s)" % cls.__qualname__)


class ObjectState(State):
    pass


class TorchState(ObjectState):
    pass


class ElasticSampler(torch.utils.data.Sampler):
    """Horovod's sampler that reshards when the world changes. At a fixed world size,
    torch.utils.data.distributed.DistributedSampler(data, hvd.size(), hvd.rank()) does its
    job."""

    def __init__(self, *args, **kwargs):
        raise _unsupported("ElasticSampler")


__all__ = ["ElasticSampler", "HostsUpdatedInterrupt", "ObjectState", "State", "TorchState",
           "run"]
