"""Horovod's Keras callbacks, built on tf.keras's Callback: Keras 3, or
Keras 2 from tf_keras when TensorFlow runs with TF_USE_LEGACY_KERAS=1
(whichever tf.keras is when this module is first imported)."""

import numpy as np
import tensorflow as tf

from horovod.tensorflow import mpi_ops
from horovod.tensorflow.functions import broadcast_variables
from horovod.tensorflow.mpi_ops import global_process_set
from horovod.tensorflow.util import optimizer_variables

keras = tf.keras


def _value(x):
    """A number from a Python number, tensor or (Keras) variable."""
    return float(np.asarray(x.numpy() if hasattr(x, "numpy") else x))


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Gives every rank root_rank's model and optimizer variables, so that
    training starts from the same state everywhere: the model's when
    training begins (if the model is built), and the model's and the
    optimizer's at the end of the first batch (when the optimizer's
    variables exist).

    Arguments:
        root_rank: the rank whose values everyone takes.
        device: accepted for Horovod's signature; libhvd places the work.
        local_variables: a variable (tf.Variable, or Keras 3's) or a list
            of them that keep their own values on every rank.
        process_set: the ranks taking part.
    """

    def __init__(self, root_rank, device='', local_variables=None,
                 process_set=global_process_set):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.process_set = process_set
        self.broadcast_done = False
        self._local_vars = {}
        # Keras 3's variables are not tf.Variables.
        kinds = (tf.Variable, getattr(keras, "Variable", tf.Variable))
        if local_variables is None:
            local_variables = []
        elif isinstance(local_variables, kinds):
            local_variables = [local_variables]
        elif not all(isinstance(v, kinds) for v in local_variables):
            raise ValueError("All local variables must be of tf.Variable "
                             "type.")
        for var in local_variables:
            self.register_local_var(var)

    def register_local_var(self, var):
        """Leaves var out of the broadcast."""
        self._local_vars[id(var)] = var

    def _model_variables(self):
        return [v for v in self.model.variables
                if id(v) not in self._local_vars]

    def on_train_begin(self, logs=None):
        # Broadcasting the built model's weights now makes the first step
        # start from root_rank's weights too.
        if self.model.built and not self.broadcast_done:
            broadcast_variables(self._model_variables(), self.root_rank,
                                process_set=self.process_set)

    def on_batch_end(self, batch, logs=None):
        if self.broadcast_done:
            return
        variables = self._model_variables()
        opt = getattr(self.model, "optimizer", None)
        if opt is not None:
            variables += optimizer_variables(opt)
        broadcast_variables(variables, self.root_rank,
                            process_set=self.process_set)
        self.broadcast_done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """Averages the epoch's metrics over the ranks at the end of each epoch,
    so that every rank (and the callbacks after this one) see the job's
    values. Put it before callbacks that read the metrics
    (ReduceLROnPlateau, TensorBoard, checkpoints).

    Arguments:
        device: accepted for Horovod's signature; libhvd places the work.
        process_set: the ranks taking part.
    """

    def __init__(self, device='', process_set=global_process_set):
        super().__init__()
        self.device = device
        self.process_set = process_set

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        names = sorted(k for k, v in logs.items()
                       if np.ndim(v) == 0 and not isinstance(v, str))
        if not names:
            return
        # One allreduce for all the metrics, in name order (the same on
        # every rank).
        values = np.array([_value(logs[k]) for k in names], np.float64)
        avg = mpi_ops._np_allreduce(values, "metric_average.%d" % epoch,
                                    mpi_ops.Average, 1.0, 1.0, 0,
                                    self.process_set)
        for k, v in zip(names, avg):
            logs[k] = float(v)


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to initial_lr * multiplier(epoch) from
    start_epoch up to end_epoch (exclusive), as Horovod's does.

    multiplier is a function of the epoch, or a number m, which means
    m ** (epoch - start_epoch). With staircase the rate changes at the
    start of each epoch (an integer epoch); without, at every batch, the
    epoch then being fractional: epoch + batch / steps_per_epoch (found in
    model.fit's parameters when not given).

    momentum_correction: while the rate changes, an optimizer's momentum
    variable (the legacy Keras 2 optimizers' hyperparameter) is scaled by
    new_lr / old_lr for that batch, as in Goyal et al.; optimizers whose
    momentum is a plain number (Keras 3's, tf_keras's current ones) are
    left alone, since their compiled step would not see the change.
    """

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None,
                 staircase=True, momentum_correction=True,
                 steps_per_epoch=None):
        super().__init__()
        if initial_lr is None:
            raise ValueError("Parameter `initial_lr` is required")
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        self.restore_momentum = None
        if callable(multiplier):
            self.multiplier = multiplier
        else:
            self.multiplier = \
                lambda epoch: multiplier ** (epoch - start_epoch)

    def _autodetect_steps_per_epoch(self):
        if self.params.get("steps"):
            return self.params["steps"]
        if self.params.get("samples") and self.params.get("batch_size"):
            return self.params["samples"] // self.params["batch_size"]
        raise ValueError(
            "Could not autodetect the number of steps per epoch: pass "
            "steps_per_epoch to %s()" % type(self).__name__)

    def _adjust_learning_rate(self, epoch):
        opt = self.model.optimizer
        old_lr = _value(opt.learning_rate)
        new_lr = self.initial_lr * self.multiplier(epoch)
        opt.learning_rate = new_lr
        momentum = getattr(opt, "momentum", None)
        if self.momentum_correction and isinstance(momentum, tf.Variable) \
                and old_lr:
            self.restore_momentum = _value(momentum)
            momentum.assign(self.restore_momentum * new_lr / old_lr)

    def _restore_momentum_if_needed(self):
        if self.restore_momentum is not None:
            self.model.optimizer.momentum.assign(self.restore_momentum)
            self.restore_momentum = None

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._autodetect_steps_per_epoch()

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_batch_begin(self, batch, logs=None):
        epoch = self.current_epoch
        if epoch < self.start_epoch or (self.end_epoch is not None and
                                        epoch >= self.end_epoch):
            return
        if self.staircase and batch == 0:
            self._adjust_learning_rate(epoch)
        elif not self.staircase:
            self._adjust_learning_rate(epoch + batch / self.steps_per_epoch)

    def on_batch_end(self, batch, logs=None):
        self._restore_momentum_if_needed()

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _value(self.model.optimizer.learning_rate)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Horovod's learning-rate warm-up: from initial_lr / size at the start
    to initial_lr after warmup_epochs, a little more each batch
    (Goyal et al., "Accurate, Large Minibatch SGD"). The rate set at batch
    b of epoch e is that of the fractional epoch
    e + (b + 1) / steps_per_epoch, so that each epoch ends on a round
    value."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        self.warmup_epochs = warmup_epochs
        self.verbose = verbose

        def multiplier(epoch):
            n = mpi_ops.size()
            epoch += 1.0 / self.steps_per_epoch
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
                  % (epoch + 1, _value(self.model.optimizer.learning_rate)))


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Saves the best model so far (by monitor) on rank 0 only.

    filepath defaults to "best.keras" (Horovod's leaves it to be set
    later; Keras 3 needs it at once)."""

    def __init__(self, monitor='val_loss', verbose=0, save_weights_only=False,
                 mode='auto', save_freq='epoch', filepath="best.keras"):
        super().__init__(filepath=filepath, monitor=monitor, verbose=verbose,
                         save_best_only=True,
                         save_weights_only=save_weights_only, mode=mode,
                         save_freq=save_freq)

    def _save_model(self, *args, **kwargs):
        if mpi_ops.rank() == 0:
            return super()._save_model(*args, **kwargs)
        return None
