"""Broadcasts of variables and objects, and allgather of objects, as in
Horovod."""

import io
import pickle

import numpy as np
import tensorflow as tf

from horovod.tensorflow import mpi_ops
from horovod.tensorflow.mpi_ops import global_process_set


def broadcast_variables(variables, root_rank, process_set=global_process_set,
                        inplace=False):
    """Assigns root_rank's values to the variables on every rank (so that
    every rank starts from the same weights).

    Arguments:
        variables: The tf.Variable objects to broadcast.
        root_rank: The rank whose values everyone takes.
        process_set: The ranks taking part (a registered ProcessSet).
        inplace: accepted for Horovod's signature; assignment is always in
            place.
    """
    variables = list(variables)
    if not variables:
        return None
    name = mpi_ops._auto_name("broadcast_variables")
    values = [mpi_ops.broadcast(v, root_rank, "%s.%d" % (name, i),
                                process_set=process_set)
              for i, v in enumerate(variables)]
    ops = [v.assign(x) for v, x in zip(variables, values)]
    return None if tf.executing_eagerly() else tf.group(*ops)


def _bytes_tensor(data):
    return tf.constant(np.frombuffer(data, dtype=np.uint8)) if data else \
        tf.zeros([0], tf.uint8)


def broadcast_object(obj, root_rank=0, session=None, name=None,
                     process_set=global_process_set):
    """Returns root_rank's obj on every rank (pickled; any picklable
    object). ``session`` is accepted for Horovod's signature (TF1) and
    ignored."""
    name = name or type(obj).__name__
    if mpi_ops.rank() == root_rank:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        length = tf.constant([len(data)], tf.int64)
    else:
        data = b""
        length = tf.zeros([1], tf.int64)
    length = mpi_ops.broadcast(length, root_rank, name="%s.sz" % name,
                               process_set=process_set)
    n = int(length.numpy()[0])
    payload = _bytes_tensor(data) if mpi_ops.rank() == root_rank else \
        tf.zeros([n], tf.uint8)
    payload = mpi_ops.broadcast(payload, root_rank, name="%s.t" % name,
                                process_set=process_set)
    if mpi_ops.rank() == root_rank:
        return obj
    return pickle.load(io.BytesIO(payload.numpy().tobytes()))


def allgather_object(obj, session=None, name=None,
                     process_set=global_process_set):
    """Returns the list of every rank's obj, in rank order (pickled)."""
    name = name or type(obj).__name__
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sizes = mpi_ops.allgather(tf.constant([len(data)], tf.int64),
                              name="%s.sz" % name, process_set=process_set)
    gathered = mpi_ops.allgather(_bytes_tensor(data), name="%s.t" % name,
                                 process_set=process_set).numpy().tobytes()
    out, at = [], 0
    for n in sizes.numpy().tolist():
        out.append(pickle.load(io.BytesIO(gathered[at:at + n])))
        at += n
    return out
