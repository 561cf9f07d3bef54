"""DistributedOptimizer: averages gradients over the ranks as backward
produces them, so that communication overlaps the rest of backward."""

import contextlib
import warnings

import torch

from horovod.torch import mpi_ops
from horovod.torch.compression import Compression
from horovod.torch.mpi_ops import Average, global_process_set


def _split(items, n):
    """items in n runs of nearly equal length, in order."""
    q, r = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + q + (1 if i < r else 0)
        out.append(items[start:end])
        start = end
    return [g for g in out if g]


class _DistributedOptimizer(torch.optim.Optimizer):
    """The methods a wrapped optimizer's class gets (see
    DistributedOptimizer)."""

    def __init__(self, params, named_parameters, compression,
                 backward_passes_per_step=1, op=Average,
                 gradient_predivide_factor=1.0, groups=None,
                 sparse_as_dense=False, process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        mpi_ops.select(process_set)
        self._compression = compression
        self._parameter_names = self._names(named_parameters)
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {p: backward_passes_per_step
                                 for p in self._parameter_names}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        self._groups = self._check_groups(groups)
        self._p_to_group = {}
        self._group_counts = {}
        # A rank outside the process set keeps its own gradients, as in
        # Horovod: it takes part in none of the set's allreduces.
        if process_set.included() and mpi_ops.size() > 1:
            self._register_hooks()

    def _names(self, named_parameters):
        params = [p for g in self.param_groups for p in g["params"]]
        if named_parameters is None:
            return {p: "allreduce.noname.%d.%d" % (i, j)
                    for i, g in enumerate(self.param_groups)
                    for j, p in enumerate(g["params"])}
        named = list(named_parameters)
        if any(not isinstance(x, tuple) for x in named):
            raise ValueError("named_parameters should be a sequence of "
                             "tuples (name, parameter), usually produced by "
                             "model.named_parameters().")
        seen, dups = set(), set()
        for name, _ in named:
            (dups if name in seen else seen).add(name)
        if dups:
            raise ValueError("Parameter names in named_parameters must be "
                             "unique. Found duplicates: %s"
                             % ", ".join(sorted(dups)))
        named_ids = {id(p) for _, p in named}
        unnamed = [id(p) for p in params if id(p) not in named_ids]
        if unnamed:
            raise ValueError("named_parameters was specified, but one or "
                             "more model parameters were not named. Python "
                             "object ids: %s"
                             % ", ".join(str(i) for i in unnamed))
        ids = {id(p) for p in params}
        return {p: name for name, p in sorted(named, key=lambda x: x[0])
                if id(p) in ids}

    @staticmethod
    def _check_groups(groups):
        if groups is None:
            return None
        if isinstance(groups, list):
            seen = set()
            for group in groups:
                for p in group:
                    if not isinstance(p, torch.Tensor):
                        raise ValueError("groups must consist of "
                                         "torch.Tensor.")
                    if id(p) in seen:
                        raise ValueError("A parameter can only appear once "
                                         "in groups.")
                    seen.add(id(p))
            return groups
        if not isinstance(groups, int) or groups <= 0:
            raise ValueError("groups should be a non-negative integer or a "
                             "list of list of torch.Tensor.")
        return groups

    def load_state_dict(self, *args, **kwargs):
        """Loads the wrapped optimizer's state; pending gradients are
        forgotten."""
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        super(self.__class__, self).load_state_dict(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        """Sets how many backward passes accumulate before an allreduce."""
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _register_hooks(self):
        params = [p for g in self.param_groups for p in g["params"]
                  if p.requires_grad]
        if self._groups is not None:
            self._make_groups(params)
        for p in params:
            self._requires_update.add(p)
            # The gradient accumulator runs once p.grad holds this pass's
            # gradient: the allreduce can start there.
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._make_hook(p))
            self._grad_accs.append(acc)

    def _make_groups(self, params):
        # Every rank must form the same groups: order by name, which is
        # the same everywhere (Horovod takes rank 0's order instead).
        params = sorted(params, key=lambda p: self._parameter_names[p])
        if isinstance(self._groups, list):
            wanted = {id(p) for p in params}
            groups = [[p for p in g if id(p) in wanted] for g in self._groups]
            grouped = {id(p) for g in groups for p in g}
            groups += [[p] for p in params if id(p) not in grouped]
        else:
            groups = _split(params, self._groups)
        for g in groups:
            if g:
                g = tuple(g)
                for p in g:
                    self._p_to_group[p] = g
                self._group_counts[g] = 0

    def _scale(self):
        if self.op == Average:
            # libhvd divides by the size; the predivide factor moves part
            # of that before the sum.
            return (1.0 / self.gradient_predivide_factor,
                    self.gradient_predivide_factor)
        return 1.0, 1.0

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            p.grad = p.data.new(p.size()).zero_()
        name = self._parameter_names.get(p)
        grad = p.grad
        if grad.is_sparse:
            if not self.sparse_as_dense:
                return mpi_ops.sparse_allreduce_async(
                    grad.coalesce(), name, self.op, self.process_set), None
            # Reduced as a dense copy; _finish makes it sparse again.
            grad = grad.to_dense()
        pre, post = self._scale()
        if mpi_ops._wire(self._compression, grad):
            h = mpi_ops._allreduce_async(grad, grad, name, self.op, pre,
                                         post, self.process_set, wire=1)
            return h, None
        sent, ctx = self._compression.compress(grad)
        h = mpi_ops.allreduce_async_(sent, name=name, op=self.op,
                                     prescale_factor=pre,
                                     postscale_factor=post,
                                     process_set=self.process_set)
        return h, ctx

    def _grouped_allreduce_grad_async(self, group):
        name = self._parameter_names.get(group[0])
        sent = [self._compression.compress(p.grad) for p in group]
        pre, post = self._scale()
        h = mpi_ops.grouped_allreduce_async_(
            [s for s, _ in sent], name=name, op=self.op,
            prescale_factor=pre, postscale_factor=post,
            process_set=self.process_set)
        return h, [c for _, c in sent]

    def _make_hook(self, p):
        def hook(*_):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than "
                        "backward_passes_per_step times before call to "
                        "step(). Increase backward_passes_per_step to "
                        "accumulate gradients locally.")
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] > 0:
                self._handles[p] = (None, None)
                return
            if self._groups is None:
                self._handles[p] = self._allreduce_grad_async(p)
                return
            group = self._p_to_group[p]
            self._group_counts[group] += 1
            if self._group_counts[group] == len(group):
                self._handles[group] = self._grouped_allreduce_grad_async(
                    group)
                for q in group:
                    self._handles.pop(q, None)
                self._group_counts[group] = 0
            else:
                self._handles[p] = (None, None)
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce, starting those that backward
        did not (parameters it did not reach); then the averaged gradients
        are in place. Nothing to do on a rank outside the process set."""
        if not self.process_set.included():
            self._synchronized = True
            return
        done = set()
        for key in self._handles:
            done.update(key if isinstance(key, tuple) else (key,))
        for p in self._requires_update - done:
            self._handles[p] = self._allreduce_grad_async(p)
        for key, (h, ctx) in list(self._handles.items()):
            if h is None:
                self._handles[key] = self._allreduce_grad_async(key)
        try:
            for key, (h, ctx) in self._handles.items():
                out = h() if callable(h) else mpi_ops.synchronize(h)
                if isinstance(key, tuple):
                    for p, o, c in zip(key, out, ctx):
                        self._finish(p, o, c)
                else:
                    self._finish(key, out, ctx)
        finally:
            self._handles.clear()
        self._synchronized = True

    def _finish(self, p, out, ctx):
        self._allreduce_delay[p] = self.backward_passes_per_step
        if self._groups is not None and p in self._p_to_group:
            self._group_counts[self._p_to_group[p]] = 0
        if p.grad.is_sparse:
            # A sparse gradient cannot be set_() from another layout.
            out = self._compression.decompress(out, ctx)
            p.grad = (out if out.is_sparse else out.to_sparse()).coalesce()
        elif out is not p.grad:
            p.grad.set_(self._compression.decompress(out, ctx))

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Within it, step() does not synchronize: for a step after an
        explicit synchronize() (gradient clipping, for example)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        """Synchronizes (unless in skip_synchronize()) and steps."""
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn(
                    "optimizer.step() called without "
                    "optimizer.skip_synchronize() context after "
                    "optimizer.synchronize(). This can cause training "
                    "slowdown. You may want to consider using "
                    "optimizer.skip_synchronize() context if you use "
                    "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        """Clears the gradients; an error while allreduces are pending."""
        if self._handles:
            raise AssertionError(
                "optimizer.zero_grad() was called after loss.backward() but "
                "before optimizer.step() or optimizer.synchronize(). This is "
                "prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None,
                         compression=Compression.none,
                         backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, num_groups=0,
                         groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps a torch optimizer so that step() uses gradients averaged over
    every rank.

    Each gradient's allreduce starts, in place on ``p.grad``, as soon as
    backward has produced it; step() (or synchronize()) waits for them.

    Arguments:
        optimizer: The torch optimizer to wrap.
        named_parameters: model.named_parameters(), to name each gradient's
            allreduce (all ranks must name them alike).
        compression: hvd.Compression.none or hvd.Compression.fp16.
        backward_passes_per_step: Backward passes whose gradients
            accumulate locally before one allreduce.
        op: hvd.Average (default) or hvd.Sum.
        gradient_predivide_factor: With Average, divide by this before the
            sum and by size/factor after.
        num_groups: Deprecated: use groups.
        groups: An int (that many groups of parameters, each reduced as
            one grouped allreduce) or a list of lists of parameters.
        sparse_as_dense: Reduce sparse gradients as dense tensors.
        process_set: The ranks taking part (a registered ProcessSet).
    """
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op "
                         "!= Average")
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` "
                      "and will be removed in v0.23.0.", DeprecationWarning)
        if groups is None:
            groups = num_groups
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression,
               backward_passes_per_step, op, gradient_predivide_factor,
               groups, sparse_as_dense, process_set)

