// Names of Collective and Algorithm, and the parser of algorithm names.
#include "comm/base/algorithm.h"

#include "comm/base/names.h"

namespace kolo {

const char* collective_name(Collective collective) {
  static const char* const kNames[] = {"allreduce", "reduce_scatter", "allgather",
                                       "broadcast", "alltoall",       "barrier"};
  return detail::enum_name(kNames, collective, "collective");
}

const char* algorithm_name(Algorithm algorithm) {
  static const char* const kNames[] = {"auto",        "ring",   "tree",        "halving_doubling",
                                       "low_latency", "direct", "hierarchical"};
  return detail::enum_name(kNames, algorithm, "algorithm");
}

Algorithm parse_algorithm(std::string_view text, std::string_view setting) {
  static const std::array<std::pair<const char*, Algorithm>, 7> kTable{
      {{"auto", Algorithm::kAuto},
       {"ring", Algorithm::kRing},
       {"tree", Algorithm::kTree},
       {"halving_doubling", Algorithm::kHalvingDoubling},
       {"low_latency", Algorithm::kLowLatency},
       {"direct", Algorithm::kDirect},
       {"hierarchical", Algorithm::kHierarchical}}};
  // The baselines' names get a message that says they are not kolo algorithms.
  const std::string lower = detail::lower_case(text);
  KOLO_CHECK_ARG(
      lower != "mpi" && lower != "gloo", setting, "='", text,
      "' is not implemented in this version of kolo; accepted: ", detail::accepted_names(kTable));
  return detail::parse_name(text, setting, "algorithm", kTable);
}

}  // namespace kolo
