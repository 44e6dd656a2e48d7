// Host identity and topology.
#include "comm/bootstrap/host.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "comm/base/env.h"

namespace kolo::bootstrap {

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

std::string host_identity() {
  if (auto name = env::get("KOLO_HOSTNAME")) return *name;
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  return std::string(name) + "/" + boot_id;
}

Topology compute_topology(const std::vector<std::string>& hosts, int rank) {
  Topology t;
  std::map<std::string, int> index;  // host -> index, in order of each host's lowest rank
  std::vector<int> count;
  t.host_of_rank.resize(hosts.size());
  for (size_t r = 0; r < hosts.size(); ++r) {
    auto [it, inserted] = index.emplace(hosts[r], static_cast<int>(count.size()));
    if (inserted) count.push_back(0);
    t.host_of_rank[r] = it->second;
    if (static_cast<int>(r) == rank) t.local_rank = count[it->second];
    ++count[it->second];
  }
  t.cross_rank = t.host_of_rank[rank];
  t.cross_size = static_cast<int>(count.size());
  t.local_size = count[t.cross_rank];
  return t;
}

}  // namespace kolo::bootstrap
