"""Broadcasts of variables and objects, and allgather of objects, as in
Horovod."""

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
        return None if tf.executing_eagerly() else tf.no_op()
    name = mpi_ops._auto_name("broadcast_variables")
    values = [mpi_ops.broadcast(v, root_rank, "%s.%d" % (name, i),
                                process_set=process_set)
              for i, v in enumerate(variables)]
    ops = [v.assign(x) for v, x in zip(variables, values)]
    return None if tf.executing_eagerly() else tf.group(*ops)


def _bytes(data):
    return np.frombuffer(data, dtype=np.uint8)


def broadcast_object(obj, root_rank=0, session=None, name=None,
                     process_set=global_process_set):
    """Returns root_rank's obj on every rank (pickled; any picklable
    object). It runs at once, in eager and in graph mode alike, so
    ``session`` (Horovod's, for TF1) is accepted and not needed."""
    name = name or type(obj).__name__
    root = mpi_ops.rank() == root_rank
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL) if root \
        else b""
    length = mpi_ops._np_broadcast(np.array([len(data)], np.int64),
                                   root_rank, "%s.sz" % name, process_set)
    payload = _bytes(data) if root else np.zeros(int(length[0]), np.uint8)
    payload = mpi_ops._np_broadcast(payload, root_rank, "%s.t" % name,
                                    process_set)
    return obj if root else pickle.loads(payload.tobytes())


def broadcast_object_fn(root_rank=0, session=None, name=None,
                        process_set=global_process_set):
    """A function of one object that returns root_rank's (Horovod's TF1
    helper, for calling broadcast_object several times)."""
    name = name or "broadcast_object_fn"

    def bcast(obj):
        return broadcast_object(obj, root_rank, session, name, process_set)
    return bcast


def allgather_object(obj, session=None, name=None,
                     process_set=global_process_set):
    """Returns the list of every rank's obj, in rank order (pickled). It
    runs at once, in eager and in graph mode alike."""
    name = name or type(obj).__name__
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sizes = mpi_ops._np_allgather(np.array([len(data)], np.int64),
                                  "%s.sz" % name, process_set)
    gathered = mpi_ops._np_allgather(_bytes(data), "%s.t" % name,
                                     process_set).tobytes()
    out, at = [], 0
    for n in sizes.tolist():
        out.append(pickle.loads(gathered[at:at + n]))
        at += n
    return out


def broadcast_global_variables(root_rank):
    """Gives every rank root_rank's values of the TF1 graph's global
    variables; returns the op that does it. TF1 graphs only, as in
    Horovod: in eager mode (TensorFlow 2) it raises RuntimeError; use
    broadcast_variables() with the model's and the optimizer's
    variables."""
    if tf.executing_eagerly():
        raise RuntimeError(
            "hvd.broadcast_global_variables() does not support eager "
            "execution. Please use `hvd.broadcast_variables(<model/optimizer "
            "variables>)` instead.")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)
