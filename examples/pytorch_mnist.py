"""pytorch_mnist.py: Horovod's PyTorch MNIST example on kolo (`import kolo.torch as hvd`).

Trains Horovod's small convolutional net on the MNIST digits of data/mnist (fetched by
scripts/fetch_data.sh; the last sixth of each digit's file is the test set, as for
build/examples/train_mnist), each rank on its share of every epoch, and prints the test accuracy
on rank 0. Run from the repository root, after building the Python package (docs/python.md):

    PYTHONPATH=build/python build/tools/kolorun -np 2 /usr/bin/python3 examples/pytorch_mnist.py
    PYTHONPATH=build/python /usr/bin/python3 examples/pytorch_mnist.py        # one process
"""
import argparse
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data.distributed

import kolo.torch as hvd

TEST_DIVISOR = 6  # the last 1/6 of each digit's images are the test set


def argument_parser(description):
    """The options both MNIST examples take (this one and pytorch_ddp_mnist.py)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--batch-size", type=int, default=64, help="input batch size per rank")
    parser.add_argument("--test-batch-size", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.01, help="learning rate (times the ranks)")
    # 0.9, not Horovod's 0.5: on this 8,337-image training set 0.5 leaves 10 epochs short of
    # converging, and N ranks (N times fewer steps) further short than one (93.6% vs 94.3%).
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--log-interval", type=int, default=40, help="batches between logs")
    parser.add_argument("--data-dir", default=os.environ.get("KOLO_DATA_DIR", "data"),
                        help="folder holding mnist/ (default $KOLO_DATA_DIR or data)")
    return parser


def parse_args():
    parser = argument_parser("PyTorch MNIST example on kolo")
    parser.add_argument("--fp16-allreduce", action="store_true", help="fp16 gradients on the wire")
    parser.add_argument("--gradient-predivide-factor", type=float, default=1.0)
    return parser.parse_args()


def load_mnist(data_dir):
    """(train, test) TensorDatasets of 1x28x28 images in [0, 1] and their digit labels."""
    splits = {"train": ([], []), "test": ([], [])}
    for digit in range(10):
        path = os.path.join(data_dir, "mnist", "src", "digits", "%d.json" % digit)
        if not os.path.exists(path):
            raise SystemExit("%s is missing: run bash scripts/fetch_data.sh" % path)
        with open(path) as f:
            images = torch.tensor(json.load(f)["data"], dtype=torch.float32).view(-1, 1, 28, 28)
        test = len(images) // TEST_DIVISOR
        for name, part in (("train", images[:len(images) - test]),
                           ("test", images[len(images) - test:])):
            splits[name][0].append(part.clamp(0, 1))
            splits[name][1].append(torch.full((len(part),), digit, dtype=torch.int64))
    normalize = lambda x: (x - 0.1307) / 0.3081  # noqa: E731 (MNIST's mean and deviation)
    return tuple(torch.utils.data.TensorDataset(normalize(torch.cat(x)), torch.cat(y))
                 for x, y in splits.values())


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value), name=name).item()


def train(epoch, model, optimizer, loader, sampler, args):
    model.train()
    sampler.set_epoch(epoch)  # a different shuffle every epoch, the same on every rank
    for batch, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if batch % args.log_interval == 0 and hvd.rank() == 0:
            print("train epoch %d [%d/%d]\tloss: %.4f" % (
                epoch, batch * len(data), len(sampler), loss.item()))


def test(model, loader, sampler):
    model.eval()
    loss, correct = 0.0, 0.0
    with torch.no_grad():
        for data, target in loader:
            output = model(data)
            loss += F.nll_loss(output, target, reduction="sum").item()
            correct += output.argmax(dim=1).eq(target).sum().item()
    # Each rank tested its share: average the shares' loss and accuracy over the ranks.
    loss = metric_average(loss / len(sampler), "avg_loss")
    accuracy = metric_average(correct / len(sampler), "avg_accuracy")
    if hvd.rank() == 0:
        print("test loss: %.4f" % loss)
        print("test accuracy: %.4f" % accuracy)
    return accuracy


def main():
    args = parse_args()
    hvd.init()
    torch.manual_seed(args.seed)
    # Horovod's example too: one CPU thread per rank (several thrash when ranks share cores).
    torch.set_num_threads(1)

    train_set, test_set = load_mnist(args.data_dir)
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train_set, num_replicas=hvd.size(), rank=hvd.rank(), seed=args.seed)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size,
                                               sampler=train_sampler)
    test_sampler = torch.utils.data.distributed.DistributedSampler(
        test_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False)
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=args.test_batch_size,
                                              sampler=test_sampler)

    model = Net()
    # Horovod's rule: the learning rate grows with the ranks (the global batch does).
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=args.momentum)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(), compression=compression,
        op=hvd.Average, gradient_predivide_factor=args.gradient_predivide_factor)
    if hvd.rank() == 0:
        print("pytorch_mnist: %d ranks, %d train / %d test images, batch %d per rank" % (
            hvd.size(), len(train_set), len(test_set), args.batch_size))

    for epoch in range(1, args.epochs + 1):
        train(epoch, model, optimizer, train_loader, train_sampler, args)
    test(model, test_loader, test_sampler)
    hvd.shutdown()


if __name__ == "__main__":
    main()
