// Flag checks the benchmarks share on top of CLI11's own: CLI11's Range (and NonNegativeNumber)
// lets NaN through, every comparison with it being false, and a NaN limit or rate then
// switches off whatever it was meant to bound.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "comm/communicator.h"

namespace kolo::bench {

// A finite number from lo to hi (below hi where hi_open), as the option's type T reads it:
// a float flag is checked at the value the program will use (0.999 as a float is above 0.999).
// hi left out: any finite number from lo up.
template <typename T = double>
CLI::Validator finite_range(double lo, double hi = std::numeric_limits<double>::max(),
                            bool hi_open = false) {
  const bool bounded = hi < std::numeric_limits<double>::max();
  std::ostringstream accepted, shown;
  accepted << "a finite number from " << lo;
  shown << "FLOAT in [" << lo << " - ";
  if (bounded) {
    accepted << (hi_open ? " to below " : " to ") << hi;
    shown << hi << (hi_open ? ")" : "]");
  } else {
    accepted << " up";
    shown << "inf)";
  }
  return CLI::Validator(
      [lo, hi, hi_open, accepted = accepted.str()](std::string& text) -> std::string {
        T value{};
        if (CLI::detail::lexical_cast(text, value) && std::isfinite(value) && value >= lo &&
            (hi_open ? value < hi : value <= hi))
          return "";
        return "'" + text + "' is not accepted; expected " + accepted;
      },
      shown.str());
}

// Every rank of a benchmark must run the same thing: flags that differ between ranks (a
// launcher that passes each rank its own arguments) paired different calls, waited on each
// other until a deadline, or printed a table that only some ranks ran. Called right after the
// communicator starts: kInvalidArgument on every rank, naming rank 0's flags and the first
// rank's that differ.
inline void require_same_flags(Communicator& comm, const std::string& flags) {
  const std::vector<std::string> all = allgather_bytes(comm, flags);
  for (size_t r = 1; r < all.size(); ++r)
    KOLO_CHECK_ARG(all[r] == all[0], "the ranks were given different flags: rank 0 '", all[0],
                   "', rank ", r, " '", all[r], "'");
}

// argv[1..] joined by blanks: the flags as given.
inline std::string joined_flags(int argc, char** argv) {
  std::string text;
  for (int i = 1; i < argc; ++i) text += (i > 1 ? " " : "") + std::string(argv[i]);
  return text;
}

}  // namespace kolo::bench
