"""Small helpers Horovod's TensorFlow modules (and its tests) import from
horovod.tensorflow.util."""

import sys

import tensorflow as tf


def _executing_eagerly():
    """True when TensorFlow runs operations eagerly here (not while a
    tf.function or a v1 graph is being built)."""
    return tf.executing_eagerly()


def vars_to_refs(variables):
    """The hashable references (Variable.ref()) of a variable or of nested
    lists of variables, as nested tuples."""
    if isinstance(variables, list):
        return tuple(vars_to_refs(v) for v in variables)
    return variables.ref()


def refs_to_vars(refs):
    """The inverse of vars_to_refs."""
    if isinstance(refs, tuple):
        return [refs_to_vars(r) for r in refs]
    return refs.deref()


def optimizer_variables(optimizer):
    """An optimizer's variables as a list: a property in Keras 3 and in
    tf_keras's optimizers, a method in the legacy ones."""
    variables = optimizer.variables
    if callable(variables) and not isinstance(variables, (list, tuple)):
        variables = variables()
    return list(variables)


def keras_major(optimizer):
    """The Keras major version whose optimizer this is (3 for Keras 3's,
    2 for tf_keras's and Keras 2's, legacy ones included), or None for
    anything else. It looks only at the Keras packages already imported:
    an optimizer's own package always is."""
    for package in ("keras", "tf_keras"):
        module = sys.modules.get(package)
        optimizers = getattr(module, "optimizers", None)
        if optimizers is None:
            continue
        bases = [getattr(optimizers, "Optimizer", None),
                 getattr(getattr(optimizers, "legacy", None), "Optimizer",
                         None)]
        if any(b is not None and isinstance(optimizer, b) for b in bases):
            return int(module.__version__.split(".")[0])
    return None
