// hwloc behind kolorun --topology and --bind (see kolorun_topology.h).
#include "tools/kolorun/kolorun_topology.h"

#include <algorithm>
#include <cstdlib>

#include "comm/base/error.h"
#include "kolo_config.h"

#if KOLO_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace kolo::kolorun {

Bind parse_bind(const std::string& text) {
  if (text == "none") return Bind::kNone;
  if (text == "core") return Bind::kCore;
  if (text == "numa") return Bind::kNuma;
  KOLO_THROW(ErrorCode::kInvalidArgument, "--bind='", text,
             "' is not accepted; expected none, core or numa");
}

#if KOLO_HAVE_HWLOC
namespace {

hwloc_topology_t load(bool io) {
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) KOLO_THROW_ERRNO("hwloc_topology_init");
  if (io) hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    KOLO_THROW_ERRNO("hwloc_topology_load");
  }
  return t;
}

std::string cpus_of(hwloc_const_bitmap_t set) {
  char* text = nullptr;
  hwloc_bitmap_list_asprintf(&text, set);
  std::string out = text ? text : "?";
  std::free(text);
  return out;
}

}  // namespace

std::string describe_topology() {
  hwloc_topology_t t = load(true);
  auto count = [&](hwloc_obj_type_t type) { return hwloc_get_nbobjs_by_type(t, type); };
  std::string out = "topology: " + std::to_string(count(HWLOC_OBJ_PACKAGE)) + " package(s), " +
                    std::to_string(count(HWLOC_OBJ_NUMANODE)) + " NUMA node(s), " +
                    std::to_string(count(HWLOC_OBJ_CORE)) + " core(s), " +
                    std::to_string(count(HWLOC_OBJ_PU)) + " hardware thread(s)\n";
  for (int i = 0; i < count(HWLOC_OBJ_NUMANODE); ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    out += "numa " + std::to_string(node->os_index) + ": cpus " + cpus_of(node->cpuset) + ", " +
           std::to_string(node->attr->numanode.local_memory >> 20) + " MiB\n";
  }
  int devices = 0;
  for (hwloc_obj_t dev = nullptr; (dev = hwloc_get_next_osdev(t, dev)) != nullptr;) {
    const char* kind = nullptr;
    switch (dev->attr->osdev.type) {
      case HWLOC_OBJ_OSDEV_NETWORK: kind = "network"; break;
      case HWLOC_OBJ_OSDEV_OPENFABRICS: kind = "openfabrics"; break;
      case HWLOC_OBJ_OSDEV_GPU:
      case HWLOC_OBJ_OSDEV_COPROC: kind = "gpu"; break;
      default: continue;
    }
    hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(t, dev);
    out += std::string(kind) + " " + (dev->name ? dev->name : "?") + ": near cpus " +
           (near ? cpus_of(near->cpuset) : std::string("?")) + "\n";
    ++devices;
  }
  if (devices == 0) out += "no network or GPU device that hwloc reports\n";
  hwloc_topology_destroy(t);
  return out;
}

Binder::Binder(Bind bind) : bind_(bind) {
  if (bind_ != Bind::kNone) topology_ = load(false);
}

Binder::~Binder() {
  if (topology_) hwloc_topology_destroy(static_cast<hwloc_topology_t>(topology_));
}

std::string Binder::bind(int rank, int ranks) const {
  if (bind_ == Bind::kNone) return "";
  auto t = static_cast<hwloc_topology_t>(topology_);
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  std::string what;
  if (bind_ == Bind::kCore) {
    const int cores = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE));
    const int each = std::max(1, cores / std::max(1, ranks));
    const int first = (rank * each) % cores;
    for (int c = first; c < first + each; ++c)
      hwloc_bitmap_or(
          set, set,
          hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, static_cast<unsigned>(c % cores))->cpuset);
    what =
        "cores " + std::to_string(first) + (each > 1 ? "-" + std::to_string(first + each - 1) : "");
  } else {
    const int nodes = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE));
    hwloc_obj_t node =
        hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(rank % nodes));
    hwloc_bitmap_copy(set, node->cpuset);
    hwloc_set_membind(t, node->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
    what = "numa " + std::to_string(node->os_index);
  }
  const int rc = hwloc_set_cpubind(t, set, HWLOC_CPUBIND_PROCESS);
  what += " (cpus " + cpus_of(set) + ")";
  hwloc_bitmap_free(set);
  if (rc != 0) KOLO_THROW_ERRNO("--bind: binding rank ", rank, " to ", what);
  return what;
}

#else  // without hwloc

std::string describe_topology() {
  KOLO_THROW(ErrorCode::kInvalidArgument,
             "--topology needs hwloc: kolo was built without it (Debian: libhwloc-dev)");
}

Binder::Binder(Bind bind) : bind_(bind) {
  KOLO_CHECK_ARG(bind == Bind::kNone,
                 "--bind needs hwloc: kolo was built without it (Debian: libhwloc-dev)");
}

Binder::~Binder() = default;

std::string Binder::bind(int, int) const {
  return "";
}

#endif

}  // namespace kolo::kolorun
