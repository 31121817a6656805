// The host side of expert parallelism, built with or without CUDA: the unique id as text and as
// a rendezvous file, the bootstrap from the environment, and the exchange plans' arithmetic.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/env.hpp"
#include "ragdot/ep_transport.hpp"

namespace ragdot::ep {

std::string to_hex(const UniqueId& id) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  s.reserve(id.bytes.size() * 2);
  for (unsigned char b : id.bytes) {
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A whole decimal integer in [lo, hi], or nullopt.
std::optional<long> parse_int(const std::string& s, long lo, long hi) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || !end || *end != '\0' || v < lo || v > hi) return std::nullopt;
  return v;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Result<UniqueId> unique_id_from_hex(std::string_view hex) {
  UniqueId id;
  if (hex.size() != id.bytes.size() * 2) {
    return invalid_argument("an NCCL unique id is " + std::to_string(id.bytes.size() * 2) + " hex digits, got " +
                            std::to_string(hex.size()) + " characters");
  }
  for (std::size_t i = 0; i < id.bytes.size(); ++i) {
    const int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return invalid_argument("an NCCL unique id has a non-hex character at " + std::to_string(2 * i + (hi < 0 ? 0 : 1)));
    }
    id.bytes[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return id;
}

Status write_unique_id_file(const std::string& path, const UniqueId& id) {
  if (path.empty()) return invalid_argument("write_unique_id_file: an empty path");
  // readers never see a partial id: write a temporary file next to it, then rename
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << to_hex(id) << '\n';
    f.flush();
    if (!f) return unavailable("cannot write the NCCL unique id to " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return unavailable("cannot rename " + tmp + " to " + path);
  }
  return Status::ok();
}

Result<UniqueId> read_unique_id_file(const std::string& path, double timeout_s) {
  if (path.empty()) return invalid_argument("read_unique_id_file: an empty path");
  // a NaN would never time out, and a huge wait overflows the clock's arithmetic: a week at most
  if (!(timeout_s >= 0 && timeout_s <= 7 * 24 * 3600.0)) {
    return invalid_argument("read_unique_id_file: timeout " + std::to_string(timeout_s) + " s (0 to a week)");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    std::ifstream f(path);
    if (f) {
      std::stringstream text;
      text << f.rdbuf();
      auto id = unique_id_from_hex(trimmed(text.str()));
      if (!id.ok()) return invalid_argument(path + ": " + id.status().message());
      return id;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return unavailable("no NCCL unique id in " + path + " after " + std::to_string(timeout_s) +
                         " s (rank 0 writes it; is it running with the same RAGDOT_EP_ID_FILE?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Result<Bootstrap> bootstrap_from_env() {
  Bootstrap b;
  const auto world = env::ep_world_size(), rank = env::ep_rank();
  if (!world || !rank) return invalid_argument("RAGDOT_EP_RANK and RAGDOT_EP_WORLD_SIZE must both be set");
  const auto w = parse_int(*world, 1, 1 << 20);
  if (!w) return invalid_argument("RAGDOT_EP_WORLD_SIZE=" + *world + ": expected a positive integer");
  const auto r = parse_int(*rank, 0, *w - 1);
  if (!r) return invalid_argument("RAGDOT_EP_RANK=" + *rank + ": expected an integer in [0, " + std::to_string(*w) + ")");
  b.world_size = int(*w);
  b.rank = int(*r);
  if (auto d = env::ep_device()) {
    const auto dev = parse_int(*d, 0, 1 << 16);
    if (!dev) return invalid_argument("RAGDOT_EP_DEVICE=" + *d + ": expected a GPU ordinal");
    b.device = int(*dev);
  }
  if (auto t = env::ep_timeout()) {
    const auto secs = parse_int(*t, 0, 7 * 24 * 3600);
    if (!secs) return invalid_argument("RAGDOT_EP_TIMEOUT=" + *t + ": expected whole seconds, 0 to 604800 (a week)");
    b.timeout_s = double(*secs);
  }
  if (auto hex = env::ep_id()) {
    auto id = unique_id_from_hex(trimmed(*hex));
    if (!id.ok()) return invalid_argument("RAGDOT_EP_ID: " + id.status().message());
    b.id = *id;
  } else if (auto file = env::ep_id_file()) {
    b.id_file = *file;
  } else {
    return invalid_argument("set RAGDOT_EP_ID (the NCCL unique id in hex) or RAGDOT_EP_ID_FILE (a path rank 0 "
                            "writes it to)");
  }
  return b;
}

namespace {

std::vector<std::int64_t> exclusive_sums(const std::vector<std::int64_t>& v) {
  std::vector<std::int64_t> out(v.size(), 0);
  for (std::size_t i = 1; i < v.size(); ++i) out[i] = out[i - 1] + v[i - 1];
  return out;
}

std::int64_t sum(const std::vector<std::int64_t>& v) {
  std::int64_t s = 0;
  for (auto x : v) s += x;
  return s;
}

std::string join(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  s += ']';
  return s;
}

}  // namespace

Result<ExchangePlan> ExchangePlan::from_counts(const std::int32_t* counts, const std::int32_t* recv_counts,
                                               int world_size, std::int64_t experts, Layout layout) {
  if (world_size < 1 || experts < 1 || experts % world_size) {
    return invalid_argument("exchange plan: " + std::to_string(experts) + " experts do not split evenly over " +
                            std::to_string(world_size) + " ranks");
  }
  if (!counts || !recv_counts) return invalid_argument("exchange plan: null counts");
  const std::int64_t local = experts / world_size;
  ExchangePlan p;
  p.world_size = world_size;
  p.layout = layout;
  p.send_rows.assign(std::size_t(world_size), 0);
  p.recv_rows.assign(std::size_t(world_size), 0);
  p.local_group_sizes.assign(std::size_t(local), 0);
  for (std::int64_t e = 0; e < experts; ++e) {
    if (counts[e] < 0 || recv_counts[e] < 0) {
      return invalid_argument("exchange plan: a negative count at expert " + std::to_string(e));
    }
    p.send_rows[std::size_t(e / local)] += counts[e];       // expert e lives on rank e / local
    p.recv_rows[std::size_t(e / local)] += recv_counts[e];  // row e / local of [world, local]: that source rank
    p.local_group_sizes[std::size_t(e % local)] += recv_counts[e];
    p.counts.push_back(counts[e]);
    p.recv_counts.push_back(recv_counts[e]);
  }
  p.send_offsets = exclusive_sums(p.send_rows);
  p.recv_offsets = exclusive_sums(p.recv_rows);
  p.send_capacity = sum(p.send_rows);
  p.recv_capacity = sum(p.recv_rows);
  return p;
}

ExchangePlan ExchangePlan::padded(int world_size, std::int64_t capacity) {
  ExchangePlan p;
  p.world_size = world_size;
  p.send_rows.assign(std::size_t(std::max(world_size, 0)), capacity);
  p.recv_rows = p.send_rows;
  p.send_offsets = exclusive_sums(p.send_rows);
  p.recv_offsets = p.send_offsets;
  p.send_capacity = p.recv_capacity = sum(p.send_rows);
  return p;
}

std::string ExchangePlan::to_string() const {
  const char* by = layout == Layout::kByExpert ? " by expert" : " by source";
  return "ep plan world=" + std::to_string(world_size) + by + " send=" + join(send_rows) + " recv=" + join(recv_rows);
}

}  // namespace ragdot::ep
