"""Horovod's DistributedGradientTape: a tf.GradientTape whose gradient()
averages the gradients over the ranks."""

import tensorflow as tf

from horovod.tensorflow import mpi_ops
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.mpi_ops import Adasum, Average, Sum, global_process_set
from horovod.tensorflow.reduce_ops import allreduce, grouped_allreduce


def _split(items, num_groups, groups):
    """Horovod's grouping of the gradients: explicit groups (lists of
    indices here; an index in none of them is a group of its own),
    num_groups equal parts, or one group."""
    if groups is not None:
        named = {i for g in groups for i in g}
        return [g for g in groups if g] + \
            [[i] for i in range(len(items)) if i not in named]
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
    if isinstance(groups, int):
        # Horovod's groups=N is num_groups=N.
        num_groups, groups = groups, None
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
            out[i] = allreduce(g, op=op,
                               name="%s.%d.sparse.%d" % (base, gi, i),
                               process_set=process_set)
        by_dtype = {}
        for i, g in dense:
            by_dtype.setdefault(g.dtype, []).append((i, g))
        for dt, items in sorted(by_dtype.items(),
                                key=lambda kv: kv[0].name):
            reduced = grouped_allreduce(
                [g for _, g in items], op=op, compression=compression,
                prescale_factor=pre, postscale_factor=post,
                process_set=process_set, name="%s.%d.%s" % (base, gi, dt.name))
            for (i, _), r in zip(items, reduced):
                out[i] = r
    return out


class LocalVariables:
    """The variables whose gradients stay on this rank (Horovod's local
    variables or sources): they are left out of the allreduce and, with
    scale_local_gradients, divided by the number of ranks, as Horovod
    does, so that they weigh as much as an averaged gradient."""

    def __init__(self):
        # By id, holding the variable so that the id stays its own.
        self._vars = {}

    def add(self, var):
        """Makes var local."""
        self._vars[id(var)] = var

    def __contains__(self, var):
        return id(var) in self._vars

    def __len__(self):
        return len(self._vars)

    def reduce(self, grads, variables, hvd_args, scale_local_gradients):
        """allreduce_gradients(grads, variables, **hvd_args) for the
        variables that are not local; the local ones' gradients as they
        are, or scaled."""
        grads, variables = list(grads), list(variables)
        if not self._vars:
            return allreduce_gradients(grads, variables, **hvd_args)
        shared = [i for i, v in enumerate(variables) if v not in self]
        reduced = allreduce_gradients([grads[i] for i in shared],
                                      [variables[i] for i in shared],
                                      **hvd_args)
        out = list(grads)
        for i, g in zip(shared, reduced):
            out[i] = g
        if scale_local_gradients:
            n = hvd_args.get("process_set", global_process_set).size()
            for i, v in enumerate(variables):
                if v in self and out[i] is not None:
                    out[i] = _divide(out[i], n)
        return out


def _divide(grad, n):
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / n, grad.indices,
                                grad.dense_shape)
    return grad / n


class _DistributedGradientTape:
    """Wraps a tf.GradientTape; everything but gradient() is the tape's."""

    def __init__(self, tape, hvd_args, scale_local_gradients):
        self._hvd_tape = tape
        self._hvd_args = hvd_args
        self._hvd_local = LocalVariables()
        self._hvd_scale_local = scale_local_gradients

    def __getattr__(self, name):
        return getattr(self._hvd_tape, name)

    def __enter__(self):
        self._hvd_tape.__enter__()
        return self

    def __exit__(self, *exc):
        return self._hvd_tape.__exit__(*exc)

    def register_local_source(self, source):
        """Keeps source's gradient on this rank: it is not allreduced
        (and is divided by the number of ranks with
        scale_local_gradients)."""
        self._hvd_local.add(source)

    def gradient(self, target, sources, output_gradients=None,
                 use_generic_names=False,
                 unconnected_gradients=tf.UnconnectedGradients.NONE):
        """The tape's gradients, averaged (by default) over the ranks.
        use_generic_names is accepted for Horovod's signature (its
        place); unconnected_gradients is tf.GradientTape's."""
        grads = self._hvd_tape.gradient(target, sources, output_gradients,
                                        unconnected_gradients)
        flat = tf.nest.flatten(grads)
        reduced = self._hvd_local.reduce(flat, tf.nest.flatten(sources),
                                         self._hvd_args,
                                         self._hvd_scale_local)
        return tf.nest.pack_sequence_as(grads, reduced)

    def get_local_and_global_gradients(self, target, sources,
                                       output_gradients=None,
                                       use_generic_names=False):
        """gradient()'s results split in two lists of (source, gradient):
        the local sources' and the others'."""
        sources = tf.nest.flatten(sources)
        grads = tf.nest.flatten(self.gradient(target, sources,
                                              output_gradients))
        pairs = list(zip(sources, grads))
        return ([p for p in pairs if p[0] in self._hvd_local],
                [p for p in pairs if p[0] not in self._hvd_local])


def _check_args(op, gradient_predivide_factor, groups):
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with "
                         "op != Average")
    if groups is not None and not isinstance(groups, list) and \
            not (isinstance(groups, int) and groups > 0):
        raise ValueError("groups should be a non-negative integer or a "
                         "list of list of tf.Variable.")


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
            (groups: a number of groups, or lists of variables).
        process_set: the ranks taking part.
        scale_local_gradients: divide the gradients of the sources given
            to register_local_source() by the number of ranks.
        device_dense, device_sparse: accepted for Horovod's signature;
            libhvd places the work.
    """
    _check_args(op, gradient_predivide_factor, groups)
    hvd_args = dict(compression=compression, sparse_as_dense=sparse_as_dense,
                    op=op, gradient_predivide_factor=gradient_predivide_factor,
                    num_groups=num_groups, groups=groups,
                    process_set=process_set)
    return _DistributedGradientTape(gradtape, hvd_args, scale_local_gradients)


def PartialDistributedGradientTape(gradtape, device_dense='',
                                   device_sparse='',
                                   compression=Compression.none,
                                   sparse_as_dense=False, op=Average,
                                   gradient_predivide_factor=1.0,
                                   num_groups=0, groups=None,
                                   process_set=global_process_set,
                                   local_layers=None,
                                   scale_local_gradients=True):
    """DistributedGradientTape whose gradients for the trainable weights
    of local_layers (a tf.keras.layers.Layer or a list of them) stay on
    this rank. The other arguments are DistributedGradientTape's."""
    tape = DistributedGradientTape(
        gradtape, device_dense, device_sparse, compression, sparse_as_dense,
        op, gradient_predivide_factor, num_groups, groups, process_set,
        scale_local_gradients)
    for var in local_layer_variables(local_layers):
        tape.register_local_source(var)
    return tape


def local_layer_variables(local_layers):
    """The trainable weights of local_layers: None, a tf.keras layer or a
    list of them (ValueError otherwise)."""
    layer_class = tf.keras.layers.Layer
    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, layer_class):
        local_layers = [local_layers]
    elif not all(isinstance(layer, layer_class) for layer in local_layers):
        raise ValueError("All local layers must be of "
                         "tf.keras.layers.Layer type.")
    return [v for layer in local_layers for v in layer.trainable_weights]
