"""horovod.keras.elastic: horovod.tensorflow.keras.elastic."""

from horovod.tensorflow.keras.elastic import (  # noqa: F401
    CommitStateCallback, KerasState, UpdateBatchStateCallback,
    UpdateEpochStateCallback, run)
