"""horovod.keras: the same as horovod.tensorflow.keras (Keras 3 is Keras
on TensorFlow's backend here)."""

from horovod.tensorflow.keras import *  # noqa: F401,F403
from horovod.tensorflow.keras import (  # noqa: F401
    DistributedOptimizer, allgather, allreduce, broadcast,
    broadcast_global_variables, callbacks, load_model, reducescatter)
