"""Exceptions raised by the horovod package, under Horovod's names."""


class HorovodInternalError(RuntimeError):
    """A collective failed: a peer rank died or disconnected, the ranks
    disagreed about an operation, or the runtime was shut down.

    The message is libhvd's account of the failure, naming the operation
    and the rank or host involved.
    """


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by State.commit() and State.check_host_updates() when the
    job's hosts changed; hvd.elastic.run then keeps the state, resets and
    calls the function again.

    skip_sync is true when hosts were only removed: every survivor holds
    the same state, so the next sync can be skipped. horovodrun does not
    yet tell the ranks of host changes (docs/elastic.md).
    """

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync
