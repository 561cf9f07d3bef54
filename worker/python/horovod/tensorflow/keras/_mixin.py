"""What the Keras 2 and Keras 3 DistributedOptimizers share: the Horovod
settings their classes carry, and the variables whose gradients stay on
this rank."""

from horovod.tensorflow.gradient_tape import LocalVariables


class DistributedBase:
    """Put before a Keras optimizer class (through the mixin of its Keras);
    the class made for each DistributedOptimizer call carries its Horovod
    settings in ``_hvd_config``, so that from_config() copies are
    distributed too."""

    _hvd_distributed = True
    _hvd_config = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._hvd_setup()

    def _hvd_setup(self):
        self._hvd_local = LocalVariables()

    def register_local_var(self, var):
        """Keeps var's gradient on this rank: it is not allreduced (and is
        divided by the number of ranks with scale_local_gradients)."""
        self._hvd_local.add(var)


def distributed_class(mixin, base, config):
    """base with mixin (a Keras's DistributedMixin) and config, under
    base's name and module, so that a saved model names the plain
    optimizer."""
    return type(base.__name__, (mixin, base), {
        "__module__": base.__module__, "_hvd_config": config,
        "__doc__": "%s whose gradients are allreduced over the ranks "
                   "(horovod.tensorflow.keras.DistributedOptimizer)."
                   % base.__name__})
