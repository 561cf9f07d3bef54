"""horovod.tensorflow.keras.elastic: Horovod's elastic state and callbacks
for tf.keras (Keras 3, or Keras 2 from tf_keras under
TF_USE_LEGACY_KERAS=1), on horovod.tensorflow.elastic (``run``'s restore
and reset loop; horovodrun runs fixed-size jobs today)."""

import tensorflow as tf

from horovod.tensorflow.elastic import TensorFlowKerasState, run

__all__ = ["KerasState", "CommitStateCallback", "UpdateBatchStateCallback",
           "UpdateEpochStateCallback", "run"]


class KerasState(TensorFlowKerasState):
    """State of a built tf.keras model and its optimizer (or the one
    given), and of the Python objects given as keyword arguments (exposed
    as attributes).

    Arguments:
        model: a built Keras model.
        optimizer: its optimizer, when not compiled into the model.
        kwargs: other attributes to keep (``epoch=0, batch=0`` for the
            callbacks below).
    """

    def __init__(self, model, optimizer=None, **kwargs):
        super().__init__(model, optimizer=optimizer, **kwargs)


class CommitStateCallback(tf.keras.callbacks.Callback):
    """Commits state every batches_per_commit batches and at the end of
    each epoch."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs=None):
        self.batches_remaining = self.batches_per_commit

    def on_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.state.commit()


class UpdateBatchStateCallback(tf.keras.callbacks.Callback):
    """Keeps state.batch at the last finished batch of the epoch (0 after
    each epoch); with a known number of steps, an epoch resumed at
    state.batch runs only the steps left."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.steps_per_epoch = None

    def on_train_begin(self, logs=None):
        self.steps_per_epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        if self.params.get("steps"):
            if self.steps_per_epoch is None:
                self.steps_per_epoch = self.params["steps"]
            self.params["steps"] = self.steps_per_epoch - self.state.batch

    def on_batch_end(self, batch, logs=None):
        self.state.batch = batch

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(tf.keras.callbacks.Callback):
    """Keeps state.epoch at the number of epochs finished, counting those
    of earlier fit() calls of the state.

    fit() may be called with ``initial_epoch=state.epoch`` (Keras then
    numbers the epochs from it) or with ``epochs=N - state.epoch`` (from
    0): the count starts at the first epoch fit() runs either way, so
    that state.epoch stays right after a reset (Horovod #2844, where it
    ran ahead by the epochs done before the reset)."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.initial_epoch = state.epoch
        self.first_epoch = None

    def on_train_begin(self, logs=None):
        self.initial_epoch = self.state.epoch
        self.first_epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        if self.first_epoch is None:
            self.first_epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        first = epoch if self.first_epoch is None else self.first_epoch
        self.state.epoch = self.initial_epoch + epoch - first + 1
