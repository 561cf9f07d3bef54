"""Horovod's elastic state objects for TensorFlow, for fixed-size jobs.

horovodrun here runs a fixed number of ranks (no --min-np/--max-np), so
hosts never join or leave a job: the state objects keep, restore and
synchronize what they track as Horovod's do, commit() never finds a host
update, and run() synchronizes the state once and calls the function; a
failed rank ends the job instead of resetting it.
"""

import functools

import tensorflow as tf

from horovod.tensorflow.functions import broadcast_object, broadcast_variables
from horovod.tensorflow.util import optimizer_variables


class ObjectState:
    """State of plain Python objects, given as keyword arguments and
    exposed as attributes: save() keeps their values, restore() puts them
    back, sync() gives every rank rank 0's saved values."""

    def __init__(self, **kwargs):
        self._saved_state = dict(kwargs)
        self._reset_callbacks = []
        self._set_attrs()

    def register_reset_callbacks(self, callbacks):
        """Functions to call after a reset (a change of the job's hosts,
        which a fixed-size job never has)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        """Runs reset() and the registered reset callbacks."""
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state, then checks for host updates."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Horovod raises HostsUpdatedInterrupt here when hosts were added
        or removed; a fixed-size job has none."""

    def reset(self):
        """Called after a reset, before the state is synchronized."""

    def save(self):
        """Keeps the current values as the last committed ones."""
        self._saved_state = {k: getattr(self, k) for k in self._saved_state}

    def restore(self):
        """Puts back the last saved values."""
        self._set_attrs()

    def sync(self):
        """Gives every rank rank 0's saved values."""
        if self._saved_state:
            self._saved_state = broadcast_object(self._saved_state, 0,
                                                 name="elastic.state")
            self._set_attrs()

    def _set_attrs(self):
        for k, v in self._saved_state.items():
            setattr(self, k, v)


class _VariablesState(ObjectState):
    """ObjectState that also keeps the values of some tf.Variables."""

    def _variables(self):
        raise NotImplementedError

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
    objects given as keyword arguments."""

    def __init__(self, variables=None, session=None, **kwargs):
        if variables is None:
            raise ValueError("TensorFlowState needs the variables to track "
                             "(TensorFlow 2 has no global variables)")
        self.variables = list(variables)
        self.session = session
        self._save_variables()
        super().__init__(**kwargs)

    def _variables(self):
        return self.variables


class TensorFlowKerasState(_VariablesState):
    """State of a built Keras model and its optimizer (or the one given),
    and of the Python objects given as keyword arguments."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        if not model.built:
            raise ValueError("Model must be built first. Run "
                             "`model.build(input_shape)`.")
        self.model = model
        self.optimizer = optimizer or model.optimizer
        self.backend = backend
        self._save_variables()
        super().__init__(**kwargs)

    def _variables(self):
        return list(self.model.variables) + \
            optimizer_variables(self.optimizer)


def run(func):
    """Horovod's elastic decorator: func(state, ...) runs after the state
    is synchronized from rank 0. A fixed-size job has no resets, so func
    runs once and its exceptions propagate."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        state.sync()
        return func(state, *args, **kwargs)
    return wrapper
