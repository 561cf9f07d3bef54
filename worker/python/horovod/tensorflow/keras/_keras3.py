"""DistributedOptimizer for Keras 3 optimizers: apply() (which
apply_gradients() and model.fit's train step call) allreduces the
gradients first."""

import tensorflow as tf

from horovod.tensorflow.keras import _mixin
from horovod.tensorflow.keras._mixin import DistributedBase


class DistributedMixin(DistributedBase):
    """Put before a Keras 3 optimizer class (see DistributedBase)."""

    def _hvd_allreduce(self, grads, variables):
        cfg = self._hvd_config
        grads = self._hvd_local.reduce(grads, variables, cfg["hvd_args"],
                                       cfg["scale_local_gradients"])
        steps = cfg["backward_passes_per_step"]
        if steps > 1 and not cfg["average_aggregated_gradients"]:
            # Keras averages what gradient_accumulation_steps gathers;
            # Horovod's default is their sum.
            grads = [None if g is None else g * steps for g in grads]
        return grads

    def apply(self, grads, trainable_variables=None):
        """Allreduces grads over the ranks, then applies them."""
        variables = (list(trainable_variables)
                     if trainable_variables is not None
                     else list(self._trainable_variables))
        grads = self._hvd_allreduce(list(grads), variables)
        return super().apply(grads, trainable_variables)

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        """Horovod's (gradient, variable) pairs of loss (a tensor recorded
        on tape, or a callable), allreduced."""
        if tape is None:
            if not callable(loss):
                raise ValueError("`tape` is required when a `Tensor` loss "
                                 "is passed.")
            tape = tf.GradientTape()
        if callable(loss):
            with tape:
                loss = loss()
        var_list = list(var_list() if callable(var_list) else var_list)
        grads = tape.gradient(loss, var_list, grad_loss)
        cfg = self._hvd_config
        grads = self._hvd_local.reduce(grads, var_list, cfg["hvd_args"],
                                       cfg["scale_local_gradients"])
        return list(zip(grads, var_list))


def make(optimizer, config, name):
    """A DistributedOptimizer like optimizer (its class and
    configuration)."""
    opt_config = optimizer.get_config()
    if name is not None:
        opt_config["name"] = name
    steps = config["backward_passes_per_step"]
    if steps > 1:
        # Keras 3 accumulates in apply() itself; each pass's gradients are
        # allreduced as they come.
        opt_config["gradient_accumulation_steps"] = steps
    return distributed_class(type(optimizer), config).from_config(opt_config)


def distributed_class(base, config):
    """base made distributed with this Keras's DistributedMixin (see
    horovod.tensorflow.keras._mixin.distributed_class)."""
    return _mixin.distributed_class(DistributedMixin, base, config)
