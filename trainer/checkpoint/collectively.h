// One error on every rank for work that ranks do apart (each writes or reads its own files):
// the lowest failing rank's code and message, carried to the others in one broadcast, so that
// every rank names the file and the rank at fault, not only a lost peer.
#pragma once

#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "comm/communicator.h"

namespace kolo::trainer {

// The lowest rank whose `ok` is false, the same on every rank; -1 when every rank is ok.
inline int first_failed(Communicator& comm, bool ok) {
  int32_t failed = ok ? comm.size() : comm.rank();
  comm.allreduce(&failed, &failed, 1, DType::kInt32, ReduceOp::kMin);
  return failed == comm.size() ? -1 : failed;
}

// Runs `work` on this rank; then every rank learns whether all succeeded. A failure anywhere
// throws on every rank the same error: the lowest failing rank's code, `what` (its folder, where
// ranks were given different ones) and message ("<what> failed on rank 1: checkpoint file ...
// has 3000 bytes, the index says 4000"). A work that writes several files names the one that
// failed in its error.
template <typename Work>
void collectively(Communicator& comm, const std::string& what, Work&& work) {
  bool ok = true;
  ErrorCode code = ErrorCode::kIo;
  std::string error;
  try {
    work();
  } catch (const Error& e) {
    ok = false;
    code = e.code();
    error = e.message();
  } catch (const std::exception& e) {
    ok = false;
    error = e.what();
  }
  const int failed = first_failed(comm, ok);
  if (failed < 0) return;
  // The failing rank's code, then "<what> failed on rank N: <error>" cut to the block (ends
  // with a NUL).
  constexpr size_t kBlock = 4096;
  std::vector<char> block(kBlock, 0);
  if (comm.rank() == failed) {
    const int32_t c = static_cast<int32_t>(code);
    std::memcpy(block.data(), &c, sizeof c);
    const std::string message = what + " failed on rank " + std::to_string(failed) + ": " + error;
    message.copy(block.data() + sizeof c, kBlock - sizeof c - 1);
  }
  comm.broadcast(block.data(), kBlock, DType::kUInt8, failed);
  int32_t c = 0;
  std::memcpy(&c, block.data(), sizeof c);
  KOLO_THROW(static_cast<ErrorCode>(c), std::string(block.data() + sizeof c));
}

}  // namespace kolo::trainer
