// Host identity and topology.
#include "comm/bootstrap/host.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
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

std::string cpu_mask_text() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return "";  // unknown to the peers
  // 64-bit words in hex, CPU i in bit i % 64 of word i / 64, up to the word of the last CPU.
  std::string text;
  size_t used = 0;
  for (int first = 0; first < CPU_SETSIZE; first += 64) {
    uint64_t word = 0;
    for (int bit = 0; bit < 64 && first + bit < CPU_SETSIZE; ++bit)
      if (CPU_ISSET(first + bit, &set)) word |= uint64_t{1} << bit;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(word));
    text += hex;
    if (word != 0) used = text.size();
  }
  text.resize(used);
  return text;
}

int cpus_in_union(const std::vector<std::string>& mask_texts) {
  std::vector<uint64_t> all;
  bool known = false;
  for (const std::string& text : mask_texts) {
    // Bytes from other ranks: anything but whole hex words means "unknown" for that rank.
    if (text.empty() || text.size() % 16 != 0 ||
        text.find_first_not_of("0123456789abcdef") != std::string::npos)
      continue;
    known = true;
    all.resize(std::max(all.size(), text.size() / 16), 0);
    for (size_t w = 0; w < text.size() / 16; ++w)
      all[w] |= std::stoull(text.substr(w * 16, 16), nullptr, 16);
  }
  int count = 0;
  for (uint64_t word : all) count += std::popcount(word);
  return known ? std::max(1, count) : usable_cpus();
}

int cpu_share(int host_cpus, int local_size) {
  return std::max(1, std::min(usable_cpus(), host_cpus / std::max(1, local_size)));
}

std::string host_identity() {
  if (auto name = env::get("KOLO_HOSTNAME")) return *name;
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  return std::string(name) + "/" + boot_id;
}

Topology compute_topology(const std::vector<std::string>& hosts, int rank,
                          const std::vector<std::string>& cpu_masks) {
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
  std::vector<std::string> here;
  for (size_t r = 0; r < cpu_masks.size() && r < hosts.size(); ++r)
    if (t.host_of_rank[r] == t.cross_rank) here.push_back(cpu_masks[r]);
  t.host_cpus = cpus_in_union(here);
  return t;
}

bool process_exited(int pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* stat = std::fopen(path, "r");
  if (stat == nullptr) return true;
  char line[512] = {};
  size_t n = std::fread(line, 1, sizeof line - 1, stat);
  std::fclose(stat);
  // "pid (comm) state ...": the command may contain ')', so take the last one.
  const char* close = std::strrchr(line, ')');
  if (n == 0 || close == nullptr || close[1] == '\0') return false;
  return close[2] == 'Z' || close[2] == 'X';
}

}  // namespace kolo::bootstrap
