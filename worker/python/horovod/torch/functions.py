"""Broadcasting a model's parameters, an optimizer's state and Python
objects, and gathering objects."""

import io
import pickle

import torch

from horovod.torch import mpi_ops
from horovod.torch.mpi_ops import global_process_set


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Copies root_rank's parameters into every rank's, in place.

    Arguments:
        params: model.state_dict(), model.named_parameters(), or a list of
            (name, tensor) pairs or of tensors.
        root_rank: The rank whose values everyone takes.
        process_set: The ranks taking part (a registered ProcessSet).
    """
    if isinstance(params, dict):
        items = sorted(params.items(), key=lambda kv: kv[0])
    elif isinstance(params, list) or hasattr(params, "__next__"):
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params))
    handles = []
    for name, p in items:
        if p is None or not torch.is_tensor(p):
            continue
        handles.append(mpi_ops.broadcast_async_(
            p.data if isinstance(p, torch.nn.Parameter) else p, root_rank,
            name=None if name is None else "broadcast.%s" % name,
            process_set=process_set))
    for h in handles:
        mpi_ops.synchronize(h)


def _tensors_of(state):
    """The optimizer state's tensors, as (path, tensor), in order."""
    out = []
    for pid in sorted(state["state"], key=str):
        for key in sorted(state["state"][pid], key=str):
            v = state["state"][pid][key]
            if torch.is_tensor(v):
                out.append(((pid, key), v))
    return out


def broadcast_optimizer_state(optimizer, root_rank, model=None,
                              process_set=global_process_set):
    """Makes every rank's optimizer state root_rank's: its tensors (such
    as momentum buffers or Adam's moments) and its options (such as lr,
    momentum or betas).

    A rank whose optimizer has no state yet makes it with a step of zero
    gradients first, so that every rank has the same tensors to receive.

    Arguments:
        optimizer: A torch optimizer, or a DistributedOptimizer.
        root_rank: The rank whose state everyone takes.
        model: Unused (Horovod's signature).
        process_set: The ranks taking part (a registered ProcessSet).
    """
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    if not optimizer.state_dict()["state"]:
        _make_state(optimizer)
    state = optimizer.state_dict()
    # Options and state that are not tensors travel as one object; every
    # rank then loads root's, with its own tensors received in place.
    skeleton = {"param_groups": state["param_groups"],
                "state": {pid: {k: v for k, v in s.items()
                                if not torch.is_tensor(v)}
                          for pid, s in state["state"].items()}}
    skeleton = broadcast_object(skeleton, root_rank,
                                name="broadcast_optimizer_state.options",
                                process_set=process_set)
    tensors = _tensors_of(state)
    handles = [mpi_ops.broadcast_async_(
        t, root_rank, name="broadcast_optimizer_state.%s.%s" % path,
        process_set=process_set) for path, t in tensors]
    for h in handles:
        mpi_ops.synchronize(h)
    for pid, s in skeleton["state"].items():
        state["state"].setdefault(pid, {}).update(s)
    state["param_groups"] = skeleton["param_groups"]
    optimizer.load_state_dict(state)


def _make_state(optimizer):
    """One step with zero gradients, which makes the optimizer's state
    without changing the parameters for most optimizers (lr is set to 0
    for the step, for the rest)."""
    saved = []
    for group in optimizer.param_groups:
        saved.append(group.get("lr"))
        if "lr" in group:
            group["lr"] = 0.0
        for p in group["params"]:
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)
    step = (super(optimizer.__class__, optimizer).step
            if hasattr(optimizer, "_allreduce_delay") else optimizer.step)
    step()
    for group, lr in zip(optimizer.param_groups, saved):
        if lr is not None:
            group["lr"] = lr


def broadcast_object(obj, root_rank=0, name=None,
                     process_set=global_process_set):
    """Returns root_rank's obj on every rank (pickled; any picklable
    object).

    Arguments:
        obj: The object (only root_rank's is used).
        root_rank: The rank whose object everyone gets.
        name: Names the two broadcasts it takes (default: the type's).
        process_set: The ranks taking part (a registered ProcessSet).
    """
    name = name or type(obj).__name__
    if mpi_ops.rank() == root_rank:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        payload = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        length = torch.tensor([len(data)], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    mpi_ops.broadcast_(length, root_rank, name="%s.sz" % name,
                       process_set=process_set)
    if mpi_ops.rank() != root_rank:
        payload = torch.empty(int(length[0]), dtype=torch.uint8)
    mpi_ops.broadcast_(payload, root_rank, name="%s.t" % name,
                       process_set=process_set)
    if mpi_ops.rank() == root_rank:
        return obj
    return pickle.load(io.BytesIO(payload.numpy().tobytes()))


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's obj, in rank order (pickled)."""
    name = name or type(obj).__name__
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    payload = torch.frombuffer(bytearray(data), dtype=torch.uint8) \
        if data else torch.empty(0, dtype=torch.uint8)
    sizes = mpi_ops.allgather(torch.tensor([len(data)], dtype=torch.int64),
                              name="%s.sz" % name, process_set=process_set)
    gathered = mpi_ops.allgather(payload, name="%s.t" % name,
                                 process_set=process_set)
    out, offset = [], 0
    raw = gathered.numpy().tobytes()
    for n in sizes.tolist():
        out.append(pickle.loads(raw[offset:offset + n]))
        offset += n
    return out


__all__ = ["broadcast_parameters", "broadcast_optimizer_state",
           "broadcast_object", "allgather_object"]
