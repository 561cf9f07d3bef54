"""Horovod's Keras callbacks, for Keras 3."""

import keras
import numpy as np
import tensorflow as tf

from horovod.tensorflow import mpi_ops
from horovod.tensorflow.functions import broadcast_variables
from horovod.tensorflow.mpi_ops import global_process_set


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Gives every rank root_rank's model and optimizer variables at the
    end of the first batch (when the optimizer's variables exist), so that
    training starts from the same state everywhere."""

    def __init__(self, root_rank, device='', process_set=global_process_set):
        super().__init__()
        self.root_rank = root_rank
        self.process_set = process_set
        self.broadcast_done = False

    def _broadcast(self):
        variables = list(self.model.variables)
        opt = getattr(self.model, "optimizer", None)
        if opt is not None:
            variables += list(opt.variables)
        broadcast_variables(variables, self.root_rank,
                            process_set=self.process_set)
        self.broadcast_done = True

    def on_train_begin(self, logs=None):
        # The model's weights are built: broadcast them before the first
        # step, and the optimizer's after it.
        if self.model.built:
            broadcast_variables(list(self.model.variables), self.root_rank,
                                process_set=self.process_set)

    def on_batch_end(self, batch, logs=None):
        if not self.broadcast_done:
            self._broadcast()


class MetricAverageCallback(keras.callbacks.Callback):
    """Averages the epoch's metrics over the ranks at the end of each epoch,
    so that every rank (and the callbacks after this one) see the job's
    values. Put it before callbacks that read the metrics."""

    def __init__(self, device='', process_set=global_process_set):
        super().__init__()
        self.process_set = process_set

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        names = sorted(k for k, v in logs.items()
                       if np.ndim(v) == 0 and not isinstance(v, str))
        if not names:
            return
        values = tf.constant([float(logs[k]) for k in names], tf.float64)
        avg = mpi_ops._allreduce(values, "metric_average.%d" % epoch,
                                 op=mpi_ops.Average,
                                 process_set=self.process_set).numpy()
        for k, v in zip(names, avg):
            logs[k] = float(v)


def _set_lr(optimizer, lr):
    optimizer.learning_rate = lr


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to initial_lr * multiplier from start_epoch
    up to end_epoch: multiplier is a number, or a function of the epoch
    (fractional, per batch, when staircase is False and steps_per_epoch is
    known)."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None,
                 staircase=True, momentum_correction=True,
                 steps_per_epoch=None):
        super().__init__()
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        self.multiplier = multiplier if callable(multiplier) else \
            (lambda epoch: multiplier)

    def _active(self, epoch):
        return epoch >= self.start_epoch and (
            self.end_epoch is None or epoch < self.end_epoch)

    def _adjust(self, epoch):
        _set_lr(self.model.optimizer,
                self.initial_lr * self.multiplier(epoch))

    def on_train_begin(self, logs=None):
        if self.steps_per_epoch is None:
            self.steps_per_epoch = self.params.get("steps")

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch
        if self._active(epoch) and (self.staircase or
                                    not self.steps_per_epoch):
            self._adjust(epoch)

    def on_batch_begin(self, batch, logs=None):
        if (not self.staircase and self.steps_per_epoch and
                self._active(self.current_epoch)):
            self._adjust(self.current_epoch + batch / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = float(keras.ops.convert_to_numpy(
                self.model.optimizer.learning_rate))


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Horovod's learning-rate warm-up: from initial_lr / size at the start
    to initial_lr after warmup_epochs, linearly per batch (Goyal et al.,
    "Accurate, Large Minibatch SGD")."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        self.warmup_epochs = warmup_epochs
        self.verbose = verbose

        def multiplier(epoch):
            n = mpi_ops.size()
            return 1.0 / n * (epoch * (n - 1) / warmup_epochs + 1)

        super().__init__(initial_lr, multiplier, start_epoch=0,
                         end_epoch=warmup_epochs, staircase=False,
                         momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and \
                mpi_ops.rank() == 0:
            print("\nEpoch %d: finished gradual learning rate warmup to %g."
                  % (epoch + 1, self.initial_lr))


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Saves the best model so far (by monitor) on rank 0 only."""

    def __init__(self, monitor='val_loss', verbose=0, mode='auto',
                 save_freq='epoch', filepath="best.keras"):
        super().__init__(filepath=filepath, monitor=monitor, verbose=verbose,
                         mode=mode, save_best_only=True, save_freq=save_freq)

    def _save_model(self, *args, **kwargs):
        if mpi_ops.rank() == 0:
            return super()._save_model(*args, **kwargs)
        return None
