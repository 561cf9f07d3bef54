"""horovod.torch.elastic (``hvd.elastic``): Horovod's elastic training
API for PyTorch: ``run``, ``TorchState``, ``ElasticSampler``.

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()

    train(hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0))

horovodrun runs fixed-size jobs today: a reset happens when every rank
raises HorovodInternalError together (a failed rank still ends the job),
and no notices of host changes arrive yet (see horovod.common.elastic).
"""

from horovod.common.elastic import run_fn
from horovod.torch.elastic.sampler import ElasticSampler
from horovod.torch.elastic.state import TorchState
from horovod.torch.mpi_ops import init, shutdown

__all__ = ["ElasticSampler", "TorchState", "run"]


def run(func):
    """Decorates func(state, *args, **kwargs), state being a TorchState
    (or another horovod.common.elastic.State), for elastic training.

    The decorated function synchronizes the state from rank 0, then calls
    func. When func raises HorovodInternalError, the state goes back to
    its last commit; when it raises HostsUpdatedInterrupt, the state is
    kept. The rank then leaves and joins the job again (hvd.shutdown(),
    hvd.init()), runs the state's reset callbacks, and starts over with
    the synchronization. func's return value is returned.

    Call it outside collectives: a rank joining a job synchronizes the
    state first, so a collective around the call would deadlock.
    """
    return run_fn(func, _reset)


def _reset():
    shutdown()
    init()
