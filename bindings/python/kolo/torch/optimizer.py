"""DistributedOptimizer, as Horovod has it: wraps a torch optimizer so that each gradient is
handed to the engine (an in-place allreduce, Average by default) as soon as autograd has
accumulated it, and step() waits for them all before updating the parameters.

Each parameter's hook sits on its gradient accumulator (Horovod's expand_as trick), so it runs
once the gradient of this backward pass is complete, while the backward pass goes on.
"""
import numbers
import os
import warnings
from contextlib import contextmanager

import torch

import kolo
from kolo.torch import basics
from kolo.torch.arguments import compression_arg, scale_arg
from kolo.torch.compression import Compression
from kolo.torch.ops import (Average, Adasum, _grouped_allreduce_async, _PreparedAllreduce,
                            allreduce_async_, sparse_allreduce_async, synchronize)
from kolo.torch.process_sets import _id_of, global_process_set


# Gradients this large are reduced on their own (not packed into a fusion buffer): those get a
# home in kolo shared memory, which peers on the host read directly (KOLO_SHARED_GRADS=0: not).
_SHARED_GRAD_BYTES = 128 * 1024


def _shared_grads_enabled():
    value = os.environ.get("KOLO_SHARED_GRADS") or "1"  # empty: unset, as everywhere in kolo
    if value not in ("0", "1"):
        raise ValueError("KOLO_SHARED_GRADS must be 0 or 1, got %r" % value)
    return value == "1"


def _check_count(value, what, low=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError("%s must be an integer >= %d, got %r" % (what, low, value))


class _DistributedOptimizer(torch.optim.Optimizer):
    _kolo_distributed = True

    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=Average, gradient_predivide_factor=1.0, groups=None, sparse_as_dense=False,
                 process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self.backward_passes_per_step = backward_passes_per_step
        self._parameter_names = self._names(named_parameters)
        self._groups = self._make_groups(groups)
        self._p_to_group = {p: g for g in (self._groups or []) for p in g}
        self._group_counts = {g: 0 for g in (self._groups or [])}
        self._allreduce_delay = {p: backward_passes_per_step
                                 for group in self.param_groups for p in group["params"]}
        self._handles = {}   # parameter or tuple of parameters (a group) -> (handle, ctx)
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        self._moved = set()  # parameters whose gradient was offered shared memory
        self._prepared = {}  # parameter -> _PreparedAllreduce of its gradient
        self._share_grads = _shared_grads_enabled()
        # Hooks on the set's members only (as Horovod): a rank outside the set trains alone, and
        # its backward() must not submit to a set it is not in.
        if basics.size() > 1 and self.process_set.included():
            self._register_hooks()

    def _names(self, named_parameters):
        all_params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is None:
            return {p: "DistributedOptimizer.noname.%d" % i for i, p in enumerate(all_params)}
        named_parameters = list(named_parameters)
        if any(not isinstance(p, tuple) for p in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                             "usually produced by model.named_parameters().")
        names = [name for name, _ in named_parameters]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError("Parameter names in named_parameters must be unique. Found "
                             "duplicates: %s" % ", ".join(duplicates))
        by_param = {p: name for name, p in named_parameters}
        unnamed = [p for p in all_params if p not in by_param]
        if unnamed:
            raise ValueError("named_parameters was specified, but %d model parameters were not "
                             "named. Python object ids: %s" % (
                                 len(unnamed), ", ".join(str(id(p)) for p in unnamed)))
        return by_param

    def _make_groups(self, groups):
        """num_groups (an int) splits the parameters, in order, into that many groups; a list of
        lists of parameters is taken as given. Each group is reduced as one unit."""
        if groups is None or groups == 0:
            return None
        params = [p for group in self.param_groups for p in group["params"] if p.requires_grad]
        if isinstance(groups, int):
            size = -(-len(params) // groups)
            return [tuple(params[i:i + size]) for i in range(0, len(params), size)]
        known = set(params)
        out = []
        group_of = {}  # id of each parameter seen -> its group
        for i, g in enumerate(groups):
            for p in g:
                if not isinstance(p, torch.Tensor):
                    raise ValueError("groups must consist of torch.Tensor: group %d holds a %s"
                                     % (i, type(p).__name__))
                if id(p) in group_of:  # its gradient would be submitted twice under one name
                    raise ValueError("A parameter can only appear once in groups: one of shape %s "
                                     "is in group %d and group %d"
                                     % (list(p.shape), group_of[id(p)], i))
                group_of[id(p)] = i
            members = tuple(p for p in g if p in known)
            if members:
                out.append(members)
        grouped = {p for g in out for p in g}
        out += [(p,) for p in params if p not in grouped]  # the rest: a group each
        return out

    def set_backward_passes_per_step(self, passes):
        """Horovod's: from now on each gradient is reduced after `passes` backward passes, and
        every parameter's count starts again. Call it between steps: a reduction already in
        flight would be lost from the count, so that is refused."""
        _check_count(passes, "set_backward_passes_per_step: passes")
        if any(handle is not None for handle, _ in self._handles.values()):
            raise AssertionError("set_backward_passes_per_step() was called after gradients "
                                 "were submitted but before optimizer.step() or "
                                 "optimizer.synchronize()")
        self.backward_passes_per_step = int(passes)
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        for group in self._group_counts:
            self._group_counts[group] = 0

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    self._requires_update.add(p)
                    accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                    accumulator.register_hook(self._make_hook(p))
                    self._grad_accs.append(accumulator)

    def _scales(self):
        # Average: the engine divides by the set's size; the predivide factor moves part of
        # that division before the reduction, as Horovod's gradient_predivide_factor does.
        if self.op == Average:
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _dense_grad(self, p):
        if p.grad is None:
            # Another rank may have a gradient for it (a data-dependent forward): send zeros.
            p.grad = torch.zeros_like(p)
        if p.grad.is_sparse and self.sparse_as_dense:
            p.grad = p.grad.to_dense()
        return p.grad

    def _share(self, p):
        """Moves p's gradient into kolo shared memory, once: autograd accumulates into it from
        then on (zero_grad() keeps it; set_to_none drops it, and it is not moved again)."""
        grad = p.grad
        if (p in self._moved or not self._share_grads or grad.is_sparse or
                not grad.is_contiguous() or grad.numel() * grad.element_size() <
                _SHARED_GRAD_BYTES):
            return grad
        self._moved.add(p)
        memory = kolo.SharedBuffer(grad.numel() * grad.element_size())
        shared = torch.frombuffer(memory, dtype=grad.dtype).view(grad.shape)
        shared.copy_(grad)
        p.grad = shared
        return shared

    def _allreduce_grad_async(self, p):
        pre, post = self._scales()
        prepared = self._prepared.get(p)
        if prepared is not None and prepared.matches(p.grad, (self.op, pre, post,
                                                              self.process_set)):
            return prepared.submit(), None
        self._dense_grad(p)
        tensor = self._share(p)
        name = self._parameter_names.get(p)
        if tensor.is_sparse:
            return sparse_allreduce_async(tensor, name, self.op, self.process_set), None
        if self._compression is Compression.none and tensor.is_contiguous():
            # The usual case: the same gradient tensor every step, reduced in place.
            self._prepared[p] = _PreparedAllreduce(tensor, name, self.op, pre, post,
                                                   self.process_set)
            return self._prepared[p].submit(), None
        compressed, ctx = self._compression.compress(tensor)
        handle = allreduce_async_(compressed, name=name, op=self.op, prescale_factor=pre,
                                  postscale_factor=post, process_set=self.process_set)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, group):
        compressed, ctxs = zip(*[self._compression.compress(self._dense_grad(p))
                                 for p in group])
        pre, post = self._scales()
        handle = _grouped_allreduce_async(list(compressed),
                                          [self._parameter_names[p] for p in group], self.op,
                                          pre, post, self.process_set)
        return handle, ctxs

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than backward_passes_per_step times "
                        "before call to step(). Increase backward_passes_per_step to "
                        "accumulate gradients locally.")
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0, (
                "the gradient of %s was computed more than backward_passes_per_step times "
                "before step()" % self._parameter_names[p])
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                try:
                    if self._groups is not None:
                        group = self._p_to_group[p]
                        if self._group_counts[group] + 1 == len(group):
                            self._handles[group] = self._grouped_allreduce_grad_async(group)
                            for member in group:
                                self._handles.pop(member, None)
                            self._group_counts[group] = 0
                            return
                        self._group_counts[group] += 1
                    else:
                        handle, ctx = self._allreduce_grad_async(p)
                except BaseException:
                    # Not submitted (a bad op or process set, say): this pass did not count,
                    # so the next backward pass or step() submits it once the cause is fixed.
                    self._allreduce_delay[p] += 1
                    raise
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce (submitting those autograd did not produce on
        this rank, as zeros) and writes the averaged gradients into p.grad."""
        if not self.process_set.included():
            self._synchronized = True
            return
        self._submit_missing()
        for key, (handle, ctx) in self._handles.items():
            output = synchronize(handle)
            if isinstance(key, tuple):
                for p, out, c in zip(key, output, ctx):
                    self._allreduce_delay[p] = self.backward_passes_per_step
                    p.grad.set_(self._compression.decompress(out, c))
            else:
                self._allreduce_delay[key] = self.backward_passes_per_step
                if ctx is None and output.is_sparse:
                    key.grad = output
                elif output is not key.grad or self._compression is not Compression.none:
                    key.grad.set_(self._compression.decompress(output, ctx))
        self._handles.clear()
        self._synchronized = True

    def _submit_missing(self):
        """Every rank submits the same names: groups and parameters whose hook did not submit."""
        if self._groups is not None:
            for group in self._groups:
                if group in self._handles or not any(p in self._requires_update for p in group):
                    continue
                for p in group:
                    self._handles.pop(p, None)
                self._group_counts[group] = 0
                self._handles[group] = self._grouped_allreduce_grad_async(group)
            return
        submitted = set(self._handles)
        for p in sorted(self._requires_update - submitted, key=self._parameter_names.get):
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)

    @contextmanager
    def skip_synchronize(self):
        """For step() after an explicit synchronize() (e.g. to clip the averaged gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps `optimizer` (an instance) so that step() applies gradients averaged over the ranks
    (Horovod's arguments: `groups` is a list of lists of parameters reduced as one unit each, or
    a count, as num_groups is, that splits them into that many)."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if op == Adasum:
        raise NotImplementedError("kolo does not implement Adasum; use op=Average or op=Sum")
    compression_arg(compression)
    _id_of(process_set)  # a registered ProcessSet: the hooks go on its members only
    _check_count(backward_passes_per_step, "backward_passes_per_step")
    _check_count(num_groups, "num_groups", low=0)
    scale_arg(gradient_predivide_factor, "gradient_predivide_factor")
    if not gradient_predivide_factor > 0:
        raise ValueError("gradient_predivide_factor must be > 0, got %r" %
                         (gradient_predivide_factor,))
    if num_groups != 0 and groups is not None:
        raise ValueError("num_groups and groups cannot be given together")
    if isinstance(groups, numbers.Integral) and not isinstance(groups, bool):
        groups = int(groups)
        if groups < 1:  # Horovod's groups may also be a count, as num_groups is
            raise ValueError("groups must be an integer >= 1 or a list of lists of parameters, "
                             "got %r" % (groups,))
    elif groups is not None and not (isinstance(groups, list) and
                                     all(isinstance(g, list) for g in groups)):
        raise ValueError("groups must be an integer >= 1 or a list of lists of parameters")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, groups if groups is not None else num_groups,
               sparse_as_dense, process_set)
