"""horovod.tensorflow.elastic (``hvd.elastic``): Horovod's elastic state
objects for TensorFlow and ``run``, on horovod.common.elastic.

``run`` restores the state after HorovodInternalError, keeps it after
HostsUpdatedInterrupt, and resets (``hvd.shutdown(); hvd.init()``) before
synchronizing it from rank 0 and calling the function again.
horovodrun runs fixed-size jobs today: a failed rank still ends the job,
and no notices of host changes arrive yet.
"""

import functools

import tensorflow as tf

from horovod.common.elastic import ObjectState, State, run_fn  # noqa: F401
from horovod.common.exceptions import HorovodInternalError
from horovod.tensorflow.functions import broadcast_object, broadcast_variables
from horovod.tensorflow.mpi_ops import init, rank, shutdown
from horovod.tensorflow.util import optimizer_variables

__all__ = ["TensorFlowKerasState", "TensorFlowState", "run"]

# A tf.function turns an exception raised in a collective into a
# tf.errors.UnknownError whose message names it.
_COLLECTIVE_FAILURES = ("HorovodInternalError", "HorovodAllreduce",
                        "HorovodAllgather", "HorovodBroadcast")


def run(func):
    """Decorates func(state, *args, **kwargs), state being a
    TensorFlowKerasState, TensorFlowState or KerasState (any
    horovod.common.elastic.State), for elastic training.

    The decorated function synchronizes the state from rank 0, then calls
    func. When func raises HorovodInternalError (also when a tf.function
    reports it as tf.errors.UnknownError), the state goes back to its
    last commit; when it raises HostsUpdatedInterrupt, the state is kept.
    The rank then leaves and joins the job again (hvd.shutdown(),
    hvd.init()), runs the state's reset callbacks, and starts over with
    the synchronization. func's return value is returned.

    Call it outside collectives: a rank joining a job synchronizes the
    state first, so a collective around the call would deadlock.
    """

    @functools.wraps(func)
    def unwrap_errors(state, *args, **kwargs):
        try:
            return func(state, *args, **kwargs)
        except tf.errors.UnknownError as e:
            if any(word in (e.message or "") for word in _COLLECTIVE_FAILURES):
                raise HorovodInternalError(e.message) from e
            raise
    return run_fn(unwrap_errors, _reset)


def _reset():
    shutdown()
    init()


def _broadcast_state_object(obj):
    # One name whatever the object: ranks must agree on it.
    return broadcast_object(obj, 0, name="elastic.state")


class _VariablesState(ObjectState):
    """ObjectState that also keeps the values of some tf.Variables
    (eager mode)."""

    def __init__(self, **kwargs):
        self._save_variables()
        super().__init__(bcast_object=_broadcast_state_object,
                         get_rank=rank, **kwargs)

    def _variables(self):
        raise NotImplementedError()

    def save(self):
        self._save_variables()
        super().save()

    def restore(self):
        for var, value in zip(self._variables(), self._values):
            var.assign(value)
        super().restore()

    def sync(self):
        broadcast_variables(self._variables(), root_rank=0)
        self._save_variables()
        super().sync()

    def _save_variables(self):
        self._values = [tf.identity(v) for v in self._variables()]


class TensorFlowState(_VariablesState):
    """State of a list of tf.Variables (eager mode), and of the Python
    objects given as keyword arguments (exposed as attributes).

    Arguments:
        variables: the tf.Variables to keep (required: TensorFlow 2 has
            no global variables to default to).
        session: accepted for Horovod's signature (TF1 graphs only).
        kwargs: other attributes to keep (``epoch=0``).
    """

    def __init__(self, variables=None, session=None, **kwargs):
        if variables is None:
            raise ValueError("TensorFlowState needs the variables to track "
                             "(TensorFlow 2 has no global variables)")
        self.variables = list(variables)
        self.session = session
        super().__init__(**kwargs)

    def _variables(self):
        return self.variables


class TensorFlowKerasState(_VariablesState):
    """State of a built Keras model and its optimizer (the one given, or
    the model's), and of the Python objects given as keyword arguments
    (exposed as attributes).

    Arguments:
        model: a built Keras model (ValueError otherwise).
        optimizer: its optimizer, when not compiled into the model.
        backend: accepted for Horovod's signature (TF1 sessions only).
        kwargs: other attributes to keep (``epoch=0, batch=0``).
    """

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        if not getattr(model, "built", True):
            raise ValueError("Model must be built first. Run "
                             "`model.build(input_shape)`.")
        self.model = model
        self.optimizer = optimizer or model.optimizer
        self.backend = backend
        super().__init__(**kwargs)

    def _variables(self):
        return list(self.model.variables) + \
            optimizer_variables(self.optimizer)
