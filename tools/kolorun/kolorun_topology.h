// kolorun's view of the host through hwloc (packages, NUMA nodes, cores, network and GPU
// devices) for --topology, and the binding of ranks to cores or NUMA nodes for --bind.
#pragma once

#include <string>

namespace kolo::kolorun {

enum class Bind { kNone, kCore, kNuma };

// "none", "core" or "numa"; anything else raises kolo::Error naming --bind.
Bind parse_bind(const std::string& text);

// What hwloc finds, one line per fact (kolorun --topology). Throws when kolo was built without
// hwloc.
std::string describe_topology();

class Binder {
 public:
  // Loads the topology (unless `bind` is kNone): before fork, so the children only bind.
  explicit Binder(Bind bind);
  ~Binder();
  Binder(const Binder&) = delete;
  Binder& operator=(const Binder&) = delete;
  // In a rank's process: kCore gives local rank `rank` of `ranks` its share of the cores (a
  // contiguous run of cores / ranks of them, at least one), kNuma NUMA node rank % nodes (CPUs
  // and memory). Returns what it bound to ("cores 2-3"), or throws.
  std::string bind(int rank, int ranks) const;

 private:
  Bind bind_;
  void* topology_ = nullptr;  // hwloc_topology_t
};

}  // namespace kolo::kolorun
