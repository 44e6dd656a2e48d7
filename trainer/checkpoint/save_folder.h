// Checks of a --save destination before training, so that one the saves cannot write is
// refused at start instead of after the training it would lose: that its folder can be written,
// and, for checkpoints (every rank writes its shard into the folder rank 0 creates), that every
// rank sees the folder rank 0 writes.
#pragma once

#include <string>

#include "comm/communicator.h"

namespace kolo::trainer {

// Creates and removes a file in `folder` or, when it does not exist yet, in its nearest existing
// parent (where creating it will write). Throws kIo "<what>: cannot create a file in <folder>:
// <the OS's reason>" (a permission, a read-only file system) when that fails.
void check_writable_folder(const std::string& folder, const std::string& what);

// Collective, right after the rendezvous: rank 0 creates the checkpoint folder `dir` (its --save)
// and writes a file with a random token into it; every other rank reads that token at its own
// `dir` and creates a file there. The ranks agree on the outcome, and any rank's failure is the
// same error on every rank, naming the rank, its path and, for a folder that is not rank 0's,
// rank 0's path: a --save that differs per host must still name one shared folder.
void check_save_folder(Communicator& comm, const std::string& dir);

}  // namespace kolo::trainer
