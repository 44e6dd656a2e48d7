"""Ranks passing different alltoall counts (rank 2 twice the others'): every rank must get
MismatchError and exit 0. Run under mpirun with KOLO_TRANSPORT=mpi by ctest
(python_mpi_mismatched_alltoall): the larger messages reached MPI, which truncated them, and
the processes then died of heap corruption ("malloc(): corrupted top size", SIGSEGV in 3 of 3
runs). Not a pytest file: a process that corrupts its heap must fail the test by its exit."""
import sys

import numpy

import kolo

comm = kolo.Communicator.init()
count = (2 if comm.rank == 2 else 1) * 1000 * comm.size
for attempt in range(3):  # the communicator stays failed: the later calls fail at once
    x, y = numpy.ones(count, numpy.float32), numpy.zeros(count, numpy.float32)
    try:
        comm.alltoall(x, y)
    except kolo.MismatchError as e:
        print("rank %d, call %d: %s" % (comm.rank, attempt, e), flush=True)
    except kolo.PeerLostError as e:
        print("rank %d, call %d: %s" % (comm.rank, attempt, e), flush=True)
    else:
        sys.exit("rank %d: a mismatched alltoall returned" % comm.rank)
