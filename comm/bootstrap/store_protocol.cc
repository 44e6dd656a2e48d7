// The store's request parser and its set / get / add (store_protocol.h has the frames).
#include "comm/bootstrap/store_protocol.h"

#include <cstring>

#include "comm/base/error.h"
#include "comm/bootstrap/store.h"

namespace kolo::bootstrap {
namespace {

// Applies one well-formed request; false (with why) closes the connection.
bool apply(StoreState& state, int conn, uint8_t cmd, const std::string& key,
           const std::string& value, std::string& out, std::string& why) {
  if (cmd == kSet) {
    state.values[key] = value;
    out += encode_response("");
    return true;
  }
  if (cmd == kCheck) {
    auto it = state.values.find(key);
    out += encode_response(it != state.values.end() ? "1" + it->second : std::string("0"));
    return true;
  }
  if (cmd == kGet) {
    auto it = state.values.find(key);
    if (it != state.values.end())
      out += encode_response(it->second);
    else
      state.waiters[key].push_back(conn);  // answered once some connection sets the key
    return true;
  }
  if (value.size() != 8) {
    why = "malformed add (" + std::to_string(value.size()) + " B value)";
    return false;
  }
  int64_t delta = 0;
  std::memcpy(&delta, value.data(), 8);
  auto it = state.values.find(key);
  int64_t now = 0;
  try {
    now = add_to_counter(key, it == state.values.end() ? nullptr : &it->second, delta);
  } catch (const Error& e) {
    why = e.what();  // the connection closes; the server and its other clients go on
    return false;
  }
  state.values[key] = std::to_string(now);
  out += encode_response(std::string(reinterpret_cast<const char*>(&now), 8));
  return true;
}

}  // namespace

std::string encode_response(const std::string& value) {
  std::string out(1 + 8, '\0');
  uint64_t len = value.size();
  std::memcpy(out.data() + 1, &len, 8);
  return out + value;
}

bool handle_requests(StoreState& state, int conn, std::string& in, std::string& out,
                     std::string& why) {
  // `at` walks the frames; consumed bytes leave `in` once, at the end.
  size_t at = 0;
  bool ok = true;
  // A client that does not read its replies gets no more answers until it does: the rest of its
  // requests wait in `in` (and the server stops reading from it, tcp_store.cc).
  while (ok && out.size() < kMaxQueuedReply && in.size() - at >= kHeaderBytes) {
    const uint8_t cmd = static_cast<uint8_t>(in[at]);
    uint32_t key_len;
    uint64_t value_len;
    std::memcpy(&key_len, in.data() + at + 1, 4);
    std::memcpy(&value_len, in.data() + at + 5, 8);
    if (cmd < kSet || cmd > kCheck || key_len > kMaxKey || value_len > kMaxValue) {
      why = "malformed request (cmd " + std::to_string(cmd) + ", key " + std::to_string(key_len) +
            " B, value " + std::to_string(value_len) + " B)";
      ok = false;
      break;
    }
    if (in.size() - at < kHeaderBytes + key_len + value_len) break;
    const std::string key = in.substr(at + kHeaderBytes, key_len);
    const std::string value = in.substr(at + kHeaderBytes + key_len, value_len);
    at += kHeaderBytes + key_len + value_len;
    ok = apply(state, conn, cmd, key, value, out, why);
  }
  in.erase(0, at);
  return ok;
}

}  // namespace kolo::bootstrap
