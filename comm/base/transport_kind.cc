// Names and the parser of TransportKind.
#include "comm/base/transport_kind.h"

#include "comm/base/names.h"

namespace kolo {

const char* transport_name(TransportKind kind) {
  static const char* const kNames[] = {"auto", "shm", "tcp", "mpi", "ucx"};
  return detail::enum_name(kNames, kind, "transport");
}

TransportKind parse_transport(std::string_view text, std::string_view setting) {
  static const std::array<std::pair<const char*, TransportKind>, 5> kTable{
      {{"auto", TransportKind::kAuto},
       {"shm", TransportKind::kShm},
       {"tcp", TransportKind::kTcp},
       {"mpi", TransportKind::kMpi},
       {"ucx", TransportKind::kUcx}}};
  return detail::parse_name(text, setting, "transport", kTable);
}

}  // namespace kolo
