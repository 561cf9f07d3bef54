"""TorchState: Horovod's elastic state of a PyTorch training process."""

import copy

import torch

from horovod.common.elastic import ObjectState
from horovod.torch.elastic.sampler import ElasticSampler
from horovod.torch.functions import (broadcast_object,
                                     broadcast_optimizer_state,
                                     broadcast_parameters)
from horovod.torch.mpi_ops import rank


def _broadcast_state_object(obj):
    # One name whatever the object: ranks must agree on it.
    return broadcast_object(obj, 0, name="elastic.state")


class TorchState(ObjectState):
    """The state of a PyTorch training process for ``hvd.elastic.run``.

    Keyword arguments become attributes. Those that are a
    ``torch.nn.Module``, a ``torch.optim.Optimizer`` or an
    ``ElasticSampler`` are kept through their ``state_dict()`` (a deep
    copy on commit) and synchronized with ``broadcast_parameters``,
    ``broadcast_optimizer_state`` or a broadcast of the sampler's
    progress; any other value is kept as a plain object (see
    ``ObjectState``). Several models or optimizers may be given under
    other names. Assigning a new model, optimizer or sampler to a tracked
    name saves it at once.

    Arguments:
        model: a torch.nn.Module (optional).
        optimizer: a torch.optim.Optimizer, hvd.DistributedOptimizer
            included (optional).
        kwargs: other attributes to keep (``epoch=0, batch=0``).
    """

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        self._handlers, kwargs = _get_handlers(kwargs)
        for name, handler in self._handlers.items():
            setattr(self, name, handler.value)
        super().__init__(bcast_object=_broadcast_state_object,
                         get_rank=rank, **kwargs)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def reset(self):
        """After a reset, each ``ElasticSampler`` splits what is left of
        its epoch among the ranks of the new job, also when the state is
        not synchronized again (hosts were only removed)."""
        for handler in self._handlers.values():
            handler.reset()
        super().reset()

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers")
        if handlers and name in handlers and name in self.__dict__:
            handlers[name].set_value(value)
        super().__setattr__(name, value)


class StateHandler:
    """Keeps one tracked object of a TorchState: save, restore, sync."""

    def __init__(self, value):
        self.value = value

    def save(self):
        """Keeps a copy of the object's current state."""
        raise NotImplementedError()

    def restore(self):
        """Puts the kept copy back into the object."""
        raise NotImplementedError()

    def sync(self):
        """Gives every rank rank 0's object state (a collective)."""
        raise NotImplementedError()

    def reset(self):
        """After a reset, before any sync: adapts the object to the new
        job's size and ranks (nothing, unless the object depends on
        them)."""

    def set_value(self, value):
        """Tracks value instead, saved at once."""
        self.value = value
        self.save()


class _StateDictHandler(StateHandler):
    """An object with state_dict()/load_state_dict(), kept as a deep
    copy of its state_dict."""

    def __init__(self, value):
        super().__init__(value)
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)


class ModelStateHandler(_StateDictHandler):
    """A torch.nn.Module: synchronized with broadcast_parameters."""

    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(_StateDictHandler):
    """A torch.optim.Optimizer: synchronized with
    broadcast_optimizer_state."""

    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class SamplerStateHandler(_StateDictHandler):
    """An ElasticSampler: its progress is taken from rank 0, which also
    splits what is left of the epoch among the current ranks."""

    def sync(self):
        self.value.load_state_dict(broadcast_object(
            self.value.state_dict(), 0, name="elastic.sampler"))

    def reset(self):
        """Splits what is left of the epoch among the new job's ranks:
        without this a reset that skips the sync (hosts only removed)
        would deal the epoch out again from its start."""
        self.value.reset()


_handler_registry = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry():
    """The (type, handler class) pairs TorchState tries in order."""
    return _handler_registry


def set_handler_registry(registry):
    """Replaces the (type, handler class) pairs TorchState tries."""
    global _handler_registry
    _handler_registry = registry


def _get_handlers(kwargs):
    handlers, plain = {}, {}
    for name, value in kwargs.items():
        for kind, handler_cls in _handler_registry:
            if isinstance(value, kind):
                handlers[name] = handler_cls(value)
                break
        else:
            plain[name] = value
    return handlers, plain
