// Host identity and the local/cross layout it implies. Two ranks are on one host when their
// identities match: hostname plus the kernel boot id, or KOLO_HOSTNAME when set (which lets a
// test pretend that ranks of one machine sit on several hosts).
#pragma once

#include <string>
#include <vector>

namespace kolo::bootstrap {

std::string host_identity();

// The CPUs this process may run on: its affinity mask (as a container or taskset limits it),
// else the online CPUs.
int usable_cpus();

struct Topology {
  int local_rank = 0, local_size = 1;  // position among the ranks of this host
  int cross_rank = 0, cross_size = 1;  // this host's index (by lowest rank) and the host count
  std::vector<int> host_of_rank;       // host index of every rank
};

// `hosts[r]` is rank r's host_identity().
Topology compute_topology(const std::vector<std::string>& hosts, int rank);

}  // namespace kolo::bootstrap
