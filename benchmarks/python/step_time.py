"""step_time.py: the training step of an MLP (784-512-512-10, batch 64 per rank, SGD) on CPU,
timed four ways at the launched world size:

  single          every rank trains its own copy alone, all ranks at once (no communication:
                  the same CPU contention as the distributed cases, so the ratio is their cost)
  hvd             kolo.torch's DistributedOptimizer (Horovod's API on kolo's engine)
  ddp-kolo        DistributedDataParallel on torch.distributed's "kolo" backend
  ddp-gloo        DistributedDataParallel on torch's own gloo backend (a new_group of its own)

Each case warms up, then runs its steps in rounds: in each, the ranks meet at a barrier and
run a share of the steps back to back, as a training loop does (so `single` ranks run free,
each at the speed the shared cores give it, and the distributed ones wait for each other only
in their collectives); a round's step time is its mean. The cases take turns round by round,
so that a burst of load from other jobs does not land on one case only. A line gives the
median over rounds of the slowest rank's step in ms, the ratio to `single`, the 1-minute load average over the rounds (os.getloadavg: other
jobs share the machine) and whether every rank ends with the same parameters (the distributed
cases must).

Run from the repository root after building the Python package with libtorch (docs/python.md):

    PYTHONPATH=build/python build/tools/kolorun -np 2 \
        /usr/bin/python3 benchmarks/python/step_time.py
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import kolo.torch as hvd
import kolo.torch.distributed as kd


def parse_args():
    parser = argparse.ArgumentParser(description="MLP step time: one process, hvd, DDP on kolo "
                                     "and on gloo")
    parser.add_argument("--batch-size", type=int, default=64, help="rows per rank and step")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps per case")
    parser.add_argument("--steps", type=int, default=300, help="timed steps per case")
    parser.add_argument("--rounds", type=int, default=15, help="turns the cases take")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    return parser.parse_args()


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 10))


def batches(args, rank):
    g = torch.Generator().manual_seed(1000 + rank)  # each rank its own data
    return [(torch.randn(args.batch_size, 784, generator=g),
             torch.randint(0, 10, (args.batch_size,), generator=g)) for _ in range(8)]


class Case:
    """One way of training: its model and optimizer, built once, and the step times so far."""

    def __init__(self, name, build):
        self.name = name
        self.model, self.optimizer, self.distributed = build()
        self.times = []
        self.step = 0

    def run(self, steps, data, timed=True):
        """`steps` steps back to back, as a training loop runs them (ranks aligned by a barrier
        before the first only); records their mean."""
        hvd.barrier()
        start = time.perf_counter()
        for _ in range(steps):
            x, y = data[self.step % len(data)]
            self.step += 1
            self.optimizer.zero_grad()
            F.cross_entropy(self.model(x), y).backward()
            self.optimizer.step()
        if timed:
            self.times.append((time.perf_counter() - start) / steps)

    def report(self, baseline, loads):
        """Prints the case's line on rank 0; returns the median over rounds of the slowest rank's
        step, in seconds."""
        every = hvd.allgather_object(self.times)
        slowest = statistics.median(max(rank[i] for rank in every) for i in range(len(self.times)))
        equal = self.same_on_every_rank() if self.distributed else "-"
        if hvd.rank() == 0:
            print("%-9s world %d  median step %8.3f ms  ratio %5.2fx  load %.2f-%.2f  "
                  "params equal: %s" % (self.name, hvd.size(), slowest * 1e3,
                                        slowest / (baseline or slowest), min(loads), max(loads),
                                        equal), flush=True)
        return slowest

    def same_on_every_rank(self):
        flat = torch.cat([p.detach().reshape(-1) for p in self.model.parameters()])
        return all(torch.equal(flat, other) for other in hvd.allgather_object(flat))


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    hvd.init()
    kd.init_process_group()
    gloo = dist.new_group(backend="gloo")
    lr = 0.01

    def single():
        model = make_model()
        return model, torch.optim.SGD(model.parameters(), lr=lr), False

    def horovod():
        model = make_model()
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                                       named_parameters=model.named_parameters())
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        return model, opt, True

    def ddp(group):
        def build():
            model = torch.nn.parallel.DistributedDataParallel(make_model(), process_group=group)
            return model, torch.optim.SGD(model.parameters(), lr=lr), True
        return build

    cases = [Case("single", single), Case("hvd", horovod), Case("ddp-kolo", ddp(None)),
             Case("ddp-gloo", ddp(gloo))]
    if hvd.rank() == 0:
        print("step_time: MLP 784-512-512-10, batch %d per rank, %d ranks, %d torch thread(s) "
              "per rank, %d steps in %d rounds (median of the rounds) after %d" % (
                  args.batch_size, hvd.size(), args.threads, args.steps, args.rounds,
                  args.warmup), flush=True)
    data = batches(args, hvd.rank())
    for case in cases:
        case.run(args.warmup, data, timed=False)
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for case in cases:
            case.run(args.steps // args.rounds, data)
        loads.append(os.getloadavg()[0])
    baseline = cases[0].report(None, loads)
    for case in cases[1:]:
        case.report(baseline, loads)
    hvd.barrier()
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
