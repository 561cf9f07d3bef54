"""Local gradient aggregation (Horovod's backward_passes_per_step > 1 for
Keras 2 optimizers): gradients add up on each rank for a number of
backward passes and go through one allreduce, then the optimizer applies
them once; the steps between only count.

It keeps its sums in tf.Variables and decides with tf.cond, so the same
code runs eagerly and inside the tf.function that model.fit traces.
"""

import tensorflow as tf


class LocalGradientAggregationHelper:
    """Adds up gradients over backward_passes_per_step calls of
    compute_gradients() and allreduces the sums on the last of them.

    Arguments:
        backward_passes_per_step: how many backward passes make one step.
        allreduce_func: f(grads, variables) -> the allreduced grads.
        sparse_as_dense: make IndexedSlices dense (they cannot be summed
            in a variable otherwise).
        average_aggregated_gradients: divide the sums by
            backward_passes_per_step.

    ``counter`` (a tf.Variable) is how many passes of the current step are
    done: 0 right after an allreduce.
    """

    def __init__(self, backward_passes_per_step, allreduce_func,
                 sparse_as_dense, average_aggregated_gradients):
        if backward_passes_per_step <= 0:
            raise ValueError("backward_passes_per_step must be > 0")
        self.backward_passes_per_step = backward_passes_per_step
        self.allreduce_func = allreduce_func
        self.sparse_as_dense = sparse_as_dense
        self.average_aggregated_gradients = average_aggregated_gradients
        self.counter = tf.Variable(0, trainable=False, dtype=tf.int32,
                                   name="hvd_aggregation_counter")
        # One sum per gradient position, made at its first gradient (in the
        # first trace inside a tf.function).
        self._sums = {}

    def _dense(self, grad):
        if isinstance(grad, tf.IndexedSlices):
            if not self.sparse_as_dense:
                raise ValueError(
                    "IndexedSlices are not supported when "
                    "`backward_passes_per_step` > 1 and `sparse_as_dense` is "
                    "False.")
            return tf.convert_to_tensor(grad)
        return grad

    def compute_gradients(self, grads, variables):
        """Adds grads to the sums; returns the allreduced sums on the last
        pass of a step (clearing them), the sums so far on the others."""
        grads = [None if g is None else self._dense(g) for g in grads]
        present = [i for i, g in enumerate(grads) if g is not None]
        for i in present:
            if i not in self._sums:
                with tf.init_scope():
                    self._sums[i] = tf.Variable(
                        tf.zeros(grads[i].shape, grads[i].dtype),
                        trainable=False, name="hvd_aggregated_grad_%d" % i)
            self._sums[i].assign_add(grads[i])
        sums = [self._sums[i].read_value() for i in present]
        self.counter.assign_add(1)
        held = [variables[i] for i in present]

        def reduce_and_clear():
            reduced = self.allreduce_func(sums, held)
            if self.average_aggregated_gradients:
                reduced = [g / self.backward_passes_per_step
                           for g in reduced]
            # The reduced values are read: the sums can start over.
            with tf.control_dependencies(
                    [g for g in reduced if not tf.executing_eagerly()]):
                self.counter.assign(0)
                for i in present:
                    self._sums[i].assign(tf.zeros_like(self._sums[i]))
            return [tf.identity(g) for g in reduced]

        out = tf.cond(tf.equal(self.counter, self.backward_passes_per_step),
                      reduce_and_clear, lambda: [tf.identity(s) for s in sums])
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        result = [None] * len(grads)
        for i, g in zip(present, out):
            result[i] = g
        return result

    def apply_gradients(self, apply_fn, optimizer):
        """apply_fn() (the optimizer's own apply_gradients) when a step's
        gradients were just allreduced; otherwise only the optimizer's
        iteration count goes up, as it would have."""

        def apply():
            return _then_iterations(apply_fn(), optimizer)

        def skip():
            return _then_iterations(optimizer.iterations.assign_add(1),
                                    optimizer)

        return tf.cond(tf.equal(self.counter, 0), apply, skip)


def _then_iterations(result, optimizer):
    """optimizer.iterations once result (ops, tensors or a variable) is
    done: both branches of the tf.cond return the same thing."""
    deps = [] if tf.executing_eagerly() else \
        [x for x in tf.nest.flatten(result)
         if isinstance(x, (tf.Tensor, tf.Operation))]
    with tf.control_dependencies(deps):
        return tf.identity(optimizer.iterations)
