"""pytorch_ddp_mnist.py: PyTorch's DistributedDataParallel on torch.distributed's "kolo" backend.

The network and the MNIST digits of pytorch_mnist.py (data/mnist, fetched by
scripts/fetch_data.sh), trained with DDP instead of Horovod's optimizer: each rank trains on its
share of every epoch, DDP averages the gradients over kolo's allreduce, and rank 0 prints the
test accuracy over the whole test set. Run from the repository root after building the Python
package with libtorch (docs/python.md):

    PYTHONPATH=build/python build/tools/kolorun -np 2 /usr/bin/python3 examples/pytorch_ddp_mnist.py
    PYTHONPATH=build/python /usr/bin/python3 examples/pytorch_ddp_mnist.py        # one process
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch.utils.data.distributed

import kolo.torch.distributed as kd
from pytorch_mnist import Net, argument_parser, load_mnist


def parse_args():
    return argument_parser("PyTorch DDP MNIST example on kolo").parse_args()


def train(epoch, model, optimizer, loader, sampler, args):
    model.train()
    sampler.set_epoch(epoch)  # a different shuffle every epoch, the same on every rank
    for batch, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()  # DDP allreduces the gradients bucket by bucket as autograd makes them
        optimizer.step()
        if batch % args.log_interval == 0 and dist.get_rank() == 0:
            print("train epoch %d [%d/%d]\tloss: %.4f" % (
                epoch, batch * len(data), len(sampler), loss.item()))


def test(model, loader):
    """Loss and accuracy over every rank's share of the test set, summed with all_reduce."""
    model.eval()
    totals = torch.zeros(3, dtype=torch.float64)  # summed loss, correct answers, images
    with torch.no_grad():
        for data, target in loader:
            output = model(data)
            totals[0] += F.nll_loss(output, target, reduction="sum").item()
            totals[1] += output.argmax(dim=1).eq(target).sum().item()
            totals[2] += len(target)
    dist.all_reduce(totals)
    if dist.get_rank() == 0:
        print("test loss: %.4f" % (totals[0] / totals[2]).item())
        print("test accuracy: %.4f" % (totals[1] / totals[2]).item())


def main():
    args = parse_args()
    kd.init_process_group()  # rank and size from kolorun (or torchrun, mpirun, Slurm)
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # one CPU thread per rank: several thrash when ranks share cores

    train_set, test_set = load_mnist(args.data_dir)
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train_set, num_replicas=size, rank=rank, seed=args.seed)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size,
                                               sampler=train_sampler)
    # Without padding, so that every test image counts once.
    test_loader = torch.utils.data.DataLoader(
        torch.utils.data.Subset(test_set, range(rank, len(test_set), size)),
        batch_size=args.test_batch_size)

    # Broadcasts rank 0's weights. Gradients as views of DDP's buckets spare two copies of
    # every gradient per step (docs/python.md).
    model = torch.nn.parallel.DistributedDataParallel(Net(), gradient_as_bucket_view=True)
    # The global batch grows with the ranks, and the learning rate with it (as pytorch_mnist.py).
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * size, momentum=args.momentum)
    if rank == 0:
        print("pytorch_ddp_mnist: %d ranks on kolo (%s), %d train / %d test images, batch %d "
              "per rank" % (size, model.process_group.transport, len(train_set), len(test_set),
                            args.batch_size))

    for epoch in range(1, args.epochs + 1):
        train(epoch, model, optimizer, train_loader, train_sampler, args)
    test(model, test_loader)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
