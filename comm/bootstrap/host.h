// Host identity and the local/cross layout it implies. Two ranks are on one host when their
// identities match: hostname plus the kernel boot id, or KOLO_HOSTNAME when set (which lets a
// test pretend that ranks of one machine sit on several hosts).
#pragma once

#include <string>
#include <vector>

namespace kolo::bootstrap {

std::string host_identity();

// Whether the process `pid` of this host has exited: gone, or a zombie its parent has not reaped
// (kill() still finds those).
bool process_exited(int pid);

// The CPUs this process may run on: its affinity mask (as a container, taskset or a launcher's
// binding limits it), else the online CPUs.
int usable_cpus();

// The same CPUs as text for the other ranks of the host (hex words of the mask), and how many
// CPUs the ranks whose texts are given may run on together (the union of their masks). Ranks
// bound one per core (mpirun's default for 2 ranks) have one CPU each but do not share it.
std::string cpu_mask_text();
int cpus_in_union(const std::vector<std::string>& mask_texts);

// How many CPUs one of `local_size` ranks may count on when the host's ranks run on
// `host_cpus` CPUs together: their even share, at most its own, at least 1.
int cpu_share(int host_cpus, int local_size);

struct Topology {
  int local_rank = 0, local_size = 1;  // position among the ranks of this host
  int cross_rank = 0, cross_size = 1;  // this host's index (by lowest rank) and the host count
  std::vector<int> host_of_rank;       // host index of every rank
  int host_cpus = 1;                   // CPUs this host's ranks may run on together
};

// `hosts[r]` is rank r's host_identity(), `cpu_masks[r]` its cpu_mask_text() (empty: this
// process's own CPUs stand for the host's).
Topology compute_topology(const std::vector<std::string>& hosts, int rank,
                          const std::vector<std::string>& cpu_masks = {});

}  // namespace kolo::bootstrap
