"""DistributedOptimizer for Keras 2 optimizers (tf_keras, which
tf.keras is under TF_USE_LEGACY_KERAS=1: its optimizers and its legacy
ones): the gradients are allreduced where Keras computes them
(compute_gradients(), or _compute_gradients() for the legacy optimizers,
which minimize() and model.fit's train step call)."""

import tensorflow as tf

from horovod.tensorflow.gradient_aggregation import (
    LocalGradientAggregationHelper)
from horovod.tensorflow.keras import _mixin
from horovod.tensorflow.keras._mixin import DistributedBase


class DistributedMixin(DistributedBase):
    """Put before a Keras 2 optimizer class (see DistributedBase)."""

    def _hvd_setup(self):
        super()._hvd_setup()
        cfg = self._hvd_config
        self._agg_helper = None
        if cfg["backward_passes_per_step"] > 1:
            self._agg_helper = LocalGradientAggregationHelper(
                cfg["backward_passes_per_step"], self._hvd_reduce,
                cfg["hvd_args"]["sparse_as_dense"],
                cfg["average_aggregated_gradients"])

    def _hvd_reduce(self, grads, variables):
        cfg = self._hvd_config
        return self._hvd_local.reduce(grads, variables, cfg["hvd_args"],
                                      cfg["scale_local_gradients"])

    def _hvd_allreduce(self, grads, variables):
        if self._agg_helper is not None:
            return self._agg_helper.compute_gradients(list(grads),
                                                      list(variables))
        return self._hvd_reduce(grads, variables)

    def compute_gradients(self, loss, var_list, tape=None):
        """The (gradient, variable) pairs of loss, allreduced over the
        ranks."""
        return self._compute_gradients(loss, var_list, None, tape)

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        """The optimizer's (gradient, variable) pairs, with the gradients
        allreduced over the ranks (or aggregated locally until the last
        backward pass of a step)."""
        base = super()
        tape = tf.GradientTape() if tape is None else tape
        if hasattr(base, "_compute_gradients"):
            pairs = base._compute_gradients(loss, var_list, grad_loss,
                                            tape=tape)
        else:
            pairs = base.compute_gradients(loss, var_list, tape=tape)
        grads, variables = zip(*pairs) if pairs else ((), ())
        return list(zip(self._hvd_allreduce(grads, variables), variables))

    def get_gradients(self, loss, params):
        """The legacy optimizers' gradients of loss, allreduced."""
        return self._hvd_allreduce(super().get_gradients(loss, params),
                                   params)

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        """Applies the gradients; with backward_passes_per_step > 1, only
        on the last pass of a step (the others count iterations)."""
        apply = super().apply_gradients
        if self._agg_helper is None:
            return apply(grads_and_vars, *args, **kwargs)
        pairs = list(grads_and_vars)
        return self._agg_helper.apply_gradients(
            lambda: apply(pairs, *args, **kwargs), self)


def make(optimizer, config, name):
    """A DistributedOptimizer like optimizer (its class and
    configuration)."""
    opt_config = optimizer.get_config()
    if name is not None:
        opt_config["name"] = name
    return distributed_class(type(optimizer), config).from_config(opt_config)


def distributed_class(base, config):
    """base made distributed with this Keras's DistributedMixin (see
    horovod.tensorflow.keras._mixin.distributed_class)."""
    return _mixin.distributed_class(DistributedMixin, base, config)
