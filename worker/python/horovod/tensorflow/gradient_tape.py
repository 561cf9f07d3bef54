"""Horovod's DistributedGradientTape: a tf.GradientTape whose gradient()
averages the gradients over the ranks."""

import tensorflow as tf

from horovod.tensorflow import mpi_ops
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.mpi_ops import Adasum, Average, Sum, global_process_set
from horovod.tensorflow.reduce_ops import allreduce, grouped_allreduce


def _split(items, num_groups, groups):
    """Horovod's grouping of the gradients: explicit groups of variables
    (by index here), num_groups equal parts, or one group."""
    if groups is not None:
        return groups
    if num_groups and num_groups > 0:
        k = -(-len(items) // num_groups)
        return [list(range(i, min(i + k, len(items))))
                for i in range(0, len(items), k)]
    return [list(range(len(items)))]


def allreduce_gradients(grads, variables, compression=Compression.none,
                        sparse_as_dense=False, op=Average,
                        gradient_predivide_factor=1.0, num_groups=0,
                        groups=None, process_set=global_process_set,
                        name=None):
    """The gradients, allreduced as DistributedGradientTape and the Keras
    DistributedOptimizer do: each group of dense gradients in one grouped
    call, sparse ones gathered (or made dense), None left None."""
    if mpi_ops.size() == 1 and process_set.process_set_id == 0:
        return list(grads)
    pre, post = 1.0, 1.0
    if op == Adasum and gradient_predivide_factor != 1.0:
        raise ValueError("gradient_predivide_factor not supported with Adasum")
    if gradient_predivide_factor != 1.0:
        if op != Average:
            raise ValueError("gradient_predivide_factor not supported with "
                             "op != Average")
        op, pre = Sum, 1.0 / gradient_predivide_factor
        post = gradient_predivide_factor / process_set.size()
    grads = list(grads)
    base = name or mpi_ops._auto_name("DistributedGradientTape")
    if groups is not None and variables is not None:
        index = {id(v): i for i, v in enumerate(variables)}
        groups = [[index[id(v)] for v in g if id(v) in index] for g in groups]
    out = list(grads)
    for gi, idx in enumerate(_split(grads, num_groups, groups)):
        dense, sparse = [], []
        for i in idx:
            g = grads[i]
            if g is None:
                continue
            if isinstance(g, tf.IndexedSlices) and sparse_as_dense:
                g = tf.convert_to_tensor(g)
            (sparse if isinstance(g, tf.IndexedSlices) else dense).append(
                (i, g))
        for i, g in sparse:
            out[i] = allreduce(g, op=op, name="%s.%d.sparse.%d" % (base, gi, i),
                               process_set=process_set)
        by_dtype = {}
        for i, g in dense:
            by_dtype.setdefault(g.dtype, []).append((i, g))
        for k, (dt, items) in enumerate(sorted(by_dtype.items(),
                                              key=lambda kv: kv[0].name)):
            reduced = grouped_allreduce(
                [g for _, g in items], op=op, compression=compression,
                prescale_factor=pre, postscale_factor=post,
                process_set=process_set, name="%s.%d.%s" % (base, gi, dt.name))
            for (i, _), r in zip(items, reduced):
                out[i] = r
    return out


class _DistributedGradientTape:
    """Wraps a tf.GradientTape; everything but gradient() is the tape's."""

    def __init__(self, tape, compression, sparse_as_dense, op,
                 gradient_predivide_factor, num_groups, groups, process_set):
        self._hvd_tape = tape
        self._hvd_args = dict(compression=compression,
                              sparse_as_dense=sparse_as_dense, op=op,
                              gradient_predivide_factor=(
                                  gradient_predivide_factor),
                              num_groups=num_groups, groups=groups,
                              process_set=process_set)

    def __getattr__(self, name):
        return getattr(self._hvd_tape, name)

    def __enter__(self):
        self._hvd_tape.__enter__()
        return self

    def __exit__(self, *exc):
        return self._hvd_tape.__exit__(*exc)

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE):
        """The tape's gradients, averaged (by default) over the ranks."""
        grads = self._hvd_tape.gradient(target, sources, output_gradients,
                                        unconnected_gradients)
        flat = tf.nest.flatten(grads)
        srcs = tf.nest.flatten(sources)
        reduced = allreduce_gradients(flat, srcs, **self._hvd_args)
        return tf.nest.pack_sequence_as(grads, reduced)


def DistributedGradientTape(gradtape, device_dense='', device_sparse='',
                            compression=Compression.none,
                            sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0,
                            groups=None, process_set=global_process_set,
                            scale_local_gradients=True):
    """A tape whose gradient() allreduces the gradients (an average by
    default) over the ranks of process_set, as Horovod's does.

    Arguments:
        gradtape: the tf.GradientTape that recorded the forward pass.
        compression: hvd.Compression.none or .fp16.
        sparse_as_dense: allreduce IndexedSlices as dense tensors.
        op: Average, Sum or Adasum.
        gradient_predivide_factor: divide by this before the sum and by
            size / factor after (Average only).
        num_groups, groups: how gradients are grouped into one call each
            (groups: lists of variables).
        process_set: the ranks taking part.
        device_dense, device_sparse, scale_local_gradients: accepted for
            Horovod's signature; libhvd places the work.
    """
    return _DistributedGradientTape(gradtape, compression, sparse_as_dense,
                                    op, gradient_predivide_factor,
                                    num_groups, groups, process_set)
