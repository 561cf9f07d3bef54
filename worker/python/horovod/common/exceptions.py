"""Exceptions raised by the horovod package, under Horovod's names."""


class HorovodInternalError(RuntimeError):
    """A collective failed: a peer rank died or disconnected, the ranks
    disagreed about an operation, or the runtime was shut down.

    The message is libhvd's account of the failure, naming the operation
    and the rank or host involved.
    """


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by Horovod's elastic mode when the host set changes.

    Elastic mode is not supported by this runtime; the class exists so
    that code which catches it imports unchanged.
    """

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync
