// Uses an installed kolo: a single-rank allreduce and the library's version.
#include <kolo/comm/communicator.h>
#include <kolo_config.h>

#include <cstdio>

int main() {
  auto comm = kolo::Communicator::init();
  int value = 21;
  comm->allreduce(&value, &value, 1, kolo::DType::kInt32, kolo::ReduceOp::kSum);
  std::printf("consumer: kolo %s, rank %d of %d, value %d\n", KOLO_VERSION, comm->rank(),
              comm->size(), value);
  return value == 21 ? 0 : 1;
}
