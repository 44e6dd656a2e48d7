// The coordinator runs on rank 0 of each process set. Given every rank's list of pending
// requests it decides which tensors are ready everywhere, checks that the ranks agree on them,
// and watches the ones that are not ready (the stall inspector).
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fusion/request.h"

namespace kolo::engine {

class Coordinator {
 public:
  // world_ranks[r] is the job rank of the set's rank r (messages name job ranks; empty: the
  // set is the whole job).
  Coordinator(int size, std::vector<int> world_ranks, double stall_check_seconds,
              double stall_shutdown_seconds);

  // lists[r] holds rank r's uncached pending requests; joined[r] says rank r has joined.
  std::vector<Response> decide(const std::vector<std::vector<Request>>& lists,
                               const std::vector<bool>& joined);

 private:
  // A name every rank has (or has joined past): checked for agreement.
  Response decide_ready(const std::string& name, const std::vector<const Request*>& by_rank) const;
  // The ready members of a grouped allreduce, checked together: one response for all of them.
  Response decide_group(const std::string& group, const std::vector<std::string>& members,
                        std::map<std::string, std::vector<const Request*>>& by_name) const;
  // "member 'g.1' is float64 on rank 0 and float32 on rank 1 (...)" for the first of `names`
  // whose dtype differs between ranks, else "": a caller that groups by dtype (kolo.torch) then
  // makes groups of other sizes, which alone reads as a group mismatch.
  std::string member_dtype_differs(
      const std::vector<std::string>& names,
      const std::map<std::string, std::vector<const Request*>>& by_name) const;
  void inspect_stalls(const std::map<std::string, std::vector<const Request*>>& pending,
                      const std::vector<bool>& joined, std::vector<Response>& out);

  // The job rank of the set's rank r; "rank 3" / "ranks 1, 3" in job ranks.
  int job_rank(int r) const;
  std::string rank_text(int r) const;
  std::string ranks_text(const std::vector<int>& set_ranks) const;

  using Clock = std::chrono::steady_clock;
  int size_;
  std::vector<int> world_ranks_;
  double stall_check_seconds_, stall_shutdown_seconds_;
  std::map<std::string, Clock::time_point> first_seen_;
  std::set<std::string> warned_;
  std::vector<int> join_order_;  // ranks in the order their join was first seen
};

}  // namespace kolo::engine
