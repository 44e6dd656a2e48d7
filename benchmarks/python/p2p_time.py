"""p2p_time.py: torch.distributed's send and recv between ranks 0 and 1 on the "kolo" backend
and on torch's gloo backend (a new_group of its own) in the same job: the median round trip of
rank 0's send then recv, answered by rank 1's recv then send, for each size.

    PYTHONPATH=build/python build/tools/kolorun -np 2 /usr/bin/python3 benchmarks/python/p2p_time.py
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import kolo.torch.distributed as kd


def round_trips(tensor, group, count):
    rank = dist.get_rank()
    times = []
    for _ in range(count):
        start = time.perf_counter()
        if rank == 0:
            dist.send(tensor, 1, group=group)
            dist.recv(tensor, 1, group=group)
        elif rank == 1:
            dist.recv(tensor, 0, group=group)
            dist.send(tensor, 0, group=group)
        times.append(time.perf_counter() - start)
    return statistics.median(times[count // 10:])


def main():
    parser = argparse.ArgumentParser(description="send/recv round trips: kolo against gloo")
    parser.add_argument("--sizes", default="8,1M,64M", help="bytes per message (K and M suffixes)")
    parser.add_argument("--iters", type=int, default=100, help="round trips per size and backend")
    args = parser.parse_args()
    kd.init_process_group()
    gloo = dist.new_group(backend="gloo")
    if dist.get_rank() == 0:
        print("p2p_time: %d ranks (0 and 1 exchange), median round trip of send + recv" %
              dist.get_world_size(), flush=True)
    for text in args.sizes.split(","):
        nbytes = int(text.rstrip("KM")) * {"K": 1024, "M": 1 << 20}.get(text[-1:], 1)
        tensor = torch.ones(max(1, nbytes // 4))
        kolo_s = round_trips(tensor, None, args.iters)
        gloo_s = round_trips(tensor, gloo, args.iters)
        if dist.get_rank() == 0:
            print("%10d B  kolo %9.1f us  gloo %9.1f us  gloo/kolo %5.2fx  kolo %6.2f GB/s one way"
                  % (tensor.numel() * 4, kolo_s * 1e6, gloo_s * 1e6, gloo_s / kolo_s,
                     tensor.numel() * 8 / kolo_s / 1e9), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
