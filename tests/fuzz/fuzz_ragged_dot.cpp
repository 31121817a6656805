// libFuzzer target: decodes the input into one ragged_dot_general description (shapes, dimension
// numbers, dtypes, group sizes, group offset, execute-time buffer faults), possibly corrupted, and
// runs it through RaggedDot::create, make_plan and Plan::execute on the cpu_ref and cpu backends.
//
// It traps (so that libFuzzer reports the input) when
//   - a rejection (create, make_plan, execute) is an ok Status or has an empty message;
//   - cpu_ref does not plan an op that create accepted;
//   - cpu_ref and cpu disagree on whether an execute succeeds;
//   - a failed execute wrote to the output;
//   - a successful output holds NaN, a nonzero where the float64 oracle is exactly zero, or
//     differs from the oracle or from cpu_ref by more than the dtype's tolerance (after each
//     element is forgiven the rounding among the dtype's subnormals).
// ASan and UBSan report everything else. Executions are capped at kMaxElements elements in all
// (operands, output and group sizes).
//
// Input layout (bytes read in order; a missing byte reads as 0): see decode() and
// tests/fuzz/make_corpus.py, which writes the seed corpus in this layout.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/cpu_features.hpp"
#include "backends/cpu/reference.hpp"
#include "ragdot/ragdot.hpp"
#include "verify/check.hpp"

namespace {

using namespace ragdot;

constexpr std::int64_t kMaxElements = 4096;  // lhs + rhs + out + group sizes elements of an executed op

class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::int8_t sbyte() { return static_cast<std::int8_t>(byte()); }
  bool empty() const { return pos_ >= size_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "ragdot fuzz: %s: %s\n", what, detail.c_str());
  __builtin_trap();
}

void expect_rejection(const Status& st, const char* where) {
  if (st.is_ok()) fail(where, "rejected with an ok Status");
  if (st.message().empty()) fail(where, "rejected with an empty message (" + st.to_string() + ")");
}

// A small value or, for a few byte values, one that tests overflow checks.
std::int64_t wide_value(std::int8_t v) {
  switch (static_cast<std::uint8_t>(v)) {
    case 0x7f: return std::int64_t(1) << 40;
    case 0x7e: return std::numeric_limits<std::int64_t>::max();
    case 0x7d: return std::numeric_limits<std::int32_t>::max();
    case 0x80: return std::numeric_limits<std::int64_t>::min();
    default: return v;
  }
}

// Fisher-Yates driven by a byte (0 leaves the order alone).
void permute(std::vector<std::int64_t>& v, std::uint8_t seed) {
  std::uint32_t s = seed;
  if (s == 0) return;
  for (std::size_t i = v.size(); i > 1; --i) {
    s = s * 1103515245u + 12345u;
    std::swap(v[i - 1], v[(s >> 16) % i]);
  }
}

constexpr DType kFloat[3] = {DType::kF32, DType::kBF16, DType::kF16};
constexpr DType kAny[6] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI32, DType::kI64};

struct Input {
  RaggedDotSpec spec;
  std::uint8_t gs_pattern = 0;
  std::uint8_t offset_byte = 0;
  std::uint8_t exec_flags = 0;
};

std::vector<std::int64_t>* dim_list(RaggedDotSpec& s, int which) {
  switch (which % 6) {
    case 0: return &s.dims.dot.lhs_contracting;
    case 1: return &s.dims.dot.rhs_contracting;
    case 2: return &s.dims.dot.lhs_batch;
    case 3: return &s.dims.dot.rhs_batch;
    case 4: return &s.dims.lhs_ragged;
    default: return &s.dims.rhs_group;
  }
}

void set_or_push(std::vector<std::int64_t>& v, std::uint8_t index, std::int64_t value) {
  if (v.empty() || index >= 0x80) {
    if (v.size() < 8) v.push_back(value);
  } else {
    v[index % v.size()] = value;
  }
}

// Layout: [mode] [counts] [sizes: batch.., m.., k.., n..] [groups] [ragged pick] [lhs perm] [rhs perm]
// [dtypes] [gs flags] [local groups] [offset] [execute flags] [mutation count] [mutations: 3 bytes each]
// [group size bytes...]
Input decode(Reader& r) {
  Input in;
  RaggedDotSpec& s = in.spec;
  const int mode = 1 + r.byte() % 3;
  const std::uint8_t counts = r.byte();
  std::int64_t nb = counts & 1, nm = std::min((counts >> 1) & 3, 2), nk = std::min((counts >> 3) & 3, 2),
               nn = std::min((counts >> 5) & 3, 2);
  if (mode == 1 && nm == 0) nm = 1;
  if (mode == 2 && nk == 0) nk = 1;
  if (mode == 3 && nb == 0) nb = 1;
  std::vector<std::int64_t> bs, ms, ks, ns;
  for (std::int64_t i = 0; i < nb; ++i) bs.push_back(r.byte() % 8);
  for (std::int64_t i = 0; i < nm; ++i) ms.push_back(r.byte() % 8);
  for (std::int64_t i = 0; i < nk; ++i) ks.push_back(r.byte() % 8);
  for (std::int64_t i = 0; i < nn; ++i) ns.push_back(r.byte() % 8);
  const std::int64_t g = r.byte() % 6;
  const std::uint8_t ragged_pick = r.byte();
  const std::uint8_t lperm = r.byte(), rperm = r.byte();
  const std::uint8_t dt = r.byte();
  const std::uint8_t gs_flags = r.byte();
  const std::uint8_t local_byte = r.byte();
  in.offset_byte = r.byte();
  in.exec_flags = r.byte();
  in.gs_pattern = (gs_flags >> 3) & 3;

  // Logical axes: lhs = batch, m, k; rhs = [group], batch, k, n. Permute and record positions.
  std::vector<std::int64_t> lhs_axes, rhs_axes;  // logical id per position
  // ids: batch 0.., m 10.., k 20.., n 30.., group 40
  for (std::int64_t i = 0; i < nb; ++i) lhs_axes.push_back(i), rhs_axes.push_back(i);
  for (std::int64_t i = 0; i < nm; ++i) lhs_axes.push_back(10 + i);
  for (std::int64_t i = 0; i < nk; ++i) lhs_axes.push_back(20 + i), rhs_axes.push_back(20 + i);
  for (std::int64_t i = 0; i < nn; ++i) rhs_axes.push_back(30 + i);
  if (mode == 1) rhs_axes.push_back(40);
  permute(lhs_axes, lperm);
  permute(rhs_axes, rperm);
  auto pos = [](const std::vector<std::int64_t>& axes, std::int64_t id) {
    for (std::size_t i = 0; i < axes.size(); ++i)
      if (axes[i] == id) return std::int64_t(i);
    return std::int64_t(-1);
  };
  auto size_of = [&](std::int64_t id) {
    if (id < 10) return bs[id];
    if (id < 20) return ms[id - 10];
    if (id < 30) return ks[id - 20];
    if (id < 40) return ns[id - 30];
    return g;
  };
  s.lhs.shape.clear();
  s.rhs.shape.clear();
  for (auto id : lhs_axes) s.lhs.shape.push_back(size_of(id));
  for (auto id : rhs_axes) s.rhs.shape.push_back(size_of(id));
  s.dims = {};
  for (std::int64_t i = 0; i < nb; ++i) {
    s.dims.dot.lhs_batch.push_back(pos(lhs_axes, i));
    s.dims.dot.rhs_batch.push_back(pos(rhs_axes, i));
  }
  for (std::int64_t i = 0; i < nk; ++i) {
    s.dims.dot.lhs_contracting.push_back(pos(lhs_axes, 20 + i));
    s.dims.dot.rhs_contracting.push_back(pos(rhs_axes, 20 + i));
  }
  const std::int64_t ragged_id = mode == 1 ? 10 + ragged_pick % nm : mode == 2 ? 20 + ragged_pick % nk : ragged_pick % nb;
  s.dims.lhs_ragged = {pos(lhs_axes, ragged_id)};
  if (mode == 1) s.dims.rhs_group = {pos(rhs_axes, 40)};

  s.lhs.dtype = kFloat[dt % 3];
  s.rhs.dtype = kFloat[(dt / 3) % 3];
  if ((dt / 9) % 4) s.preferred_element_type = kFloat[(dt / 9) % 4 - 1];
  s.group_sizes.dtype = (gs_flags & 1) ? DType::kI64 : DType::kI32;
  s.group_sizes.shape = {g};
  if (gs_flags & 4) {
    if (mode != 3) s.group_offset = GroupOffset{g > 0 ? local_byte % (g + 1) : 0};
    else s.group_offset = GroupOffset{local_byte % 3};  // invalid in mode 3
    if (mode == 1) s.rhs.shape[std::size_t(s.dims.rhs_group[0])] = s.group_offset->local_groups;
  }
  if ((gs_flags & 2) && s.lhs.rank() > 0) {
    // The full form [b..., x..., g] (see op.hpp), built from JAX's rule.
    std::vector<std::int64_t> shape;
    const std::int64_t ragged = s.dims.lhs_ragged[0];
    auto before = [&](const std::vector<std::int64_t>& v) {
      for (auto x : v) {
        if (x == ragged) break;
        shape.push_back(s.lhs.shape[std::size_t(x)]);
      }
    };
    if (mode != 3)
      for (auto b : s.dims.dot.lhs_batch) shape.push_back(s.lhs.shape[std::size_t(b)]);
    if (mode == 1) {
      std::vector<std::int64_t> free;
      for (std::int64_t i = 0; i < s.lhs.rank(); ++i) {
        const auto id = lhs_axes[std::size_t(i)];
        if (id >= 10 && id < 20) free.push_back(i);
      }
      before(free);
    } else if (mode == 2) {
      before(s.dims.dot.lhs_contracting);
    } else {
      before(s.dims.dot.lhs_batch);
    }
    shape.push_back(g);
    s.group_sizes.shape = shape;
  }

  // Corruptions: any field, to any small (or a few huge) values.
  const int mutations = r.byte() % 5;
  for (int i = 0; i < mutations; ++i) {
    const std::uint8_t what = r.byte(), index = r.byte();
    const std::int8_t value = r.sbyte();
    const std::int64_t v = wide_value(value);
    auto set_shape = [&](TensorSpec& t) {
      if (index >= 0xc0) {
        if (!t.shape.empty()) t.shape.pop_back();
      } else if (index >= 0x80) {
        if (t.shape.size() < 8) t.shape.push_back(v);
      } else if (!t.shape.empty()) {
        t.shape[index % t.shape.size()] = v;
      }
    };
    switch (what % 12) {
      case 0: set_shape(s.lhs); break;
      case 1: set_shape(s.rhs); break;
      case 2: set_shape(s.group_sizes); break;
      case 3: set_or_push(*dim_list(s, index), index, v); break;
      case 4: { auto* l = dim_list(s, index); if (!l->empty()) l->pop_back(); break; }
      case 5: s.lhs.dtype = kAny[std::uint8_t(value) % 6]; break;
      case 6: s.rhs.dtype = kAny[std::uint8_t(value) % 6]; break;
      case 7: s.group_sizes.dtype = kAny[std::uint8_t(value) % 6]; break;
      case 8: s.preferred_element_type = kAny[std::uint8_t(value) % 6]; break;
      case 9: s.group_offset = GroupOffset{v}; break;
      case 10: s.group_offset.reset(); break;
      default: set_or_push(*dim_list(s, index), index, std::int64_t(value % 8)); break;
    }
  }
  return in;
}

// Group sizes for an accepted op: rows of g values, following the pattern.
std::vector<unsigned char> make_group_sizes(const RaggedDot& op, std::uint8_t pattern, Reader& r) {
  const TensorSpec& gs = op.spec().group_sizes;
  const std::int64_t count = gs.num_elements();
  const std::int64_t g = op.num_groups();
  const std::int64_t extent = op.spec().lhs.shape[std::size_t(op.lhs_ragged_dim())];
  std::vector<std::int64_t> v(std::size_t(count), 0);
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t j = g > 0 ? i % g : 0;
    if (pattern == 1) {
      v[std::size_t(i)] = r.sbyte() % 9;  // small, possibly negative
    } else if (pattern == 2) {
      const std::uint8_t b = r.byte();
      const std::int64_t big[] = {extent + 1, std::numeric_limits<std::int32_t>::max(),
                                  std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min(),
                                  std::numeric_limits<std::int32_t>::min(), 0, 1, extent};
      v[std::size_t(i)] = big[b % 8];
    } else {
      // A split of the extent: each group takes a share of what is left; pattern 3 gives the
      // last group the remainder (sum == extent), pattern 0 may leave a tail.
      std::int64_t used = 0;
      for (std::int64_t q = i - j; q < i; ++q) used += v[std::size_t(q)];
      const std::int64_t left = extent - used;
      v[std::size_t(i)] = (pattern == 3 && j == g - 1) ? left : r.byte() % (left + 1);
    }
  }
  std::vector<unsigned char> bytes(std::size_t(count) * dtype_size(gs.dtype) + 1);
  for (std::int64_t i = 0; i < count; ++i) {
    if (gs.dtype == DType::kI32) {
      const auto x = static_cast<std::int32_t>(v[std::size_t(i)]);
      std::memcpy(bytes.data() + i * 4, &x, 4);
    } else {
      std::memcpy(bytes.data() + i * 8, &v[std::size_t(i)], 8);
    }
  }
  return bytes;
}

std::int32_t decode_offset(std::uint8_t b, std::int64_t groups) {
  if (b == 0xff) return std::numeric_limits<std::int32_t>::max();
  if (b == 0xfe) return std::numeric_limits<std::int32_t>::min();
  if (b >= 0x80) return static_cast<std::int8_t>(b);  // often out of range
  return groups > 0 ? b % (groups + 1) : 0;
}

// Host buffers for one execute, 64-byte aligned, with the output poisoned.
struct Buffers {
  std::vector<unsigned char> storage;
  unsigned char* lhs = nullptr;
  unsigned char* rhs = nullptr;
  unsigned char* out = nullptr;
  unsigned char* ws = nullptr;
};

unsigned char* align64(unsigned char* p) {
  return reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(p) + 63) / 64 * 64);
}

struct RunResult {
  Status status;
  std::vector<unsigned char> out;  // the output buffer's bytes after execute
};

RunResult run(const Plan& plan, const std::vector<unsigned char>& lhs, const std::vector<unsigned char>& rhs,
              const std::vector<unsigned char>& gs, std::int32_t offset, const std::vector<unsigned char>& poisoned,
              std::uint8_t fault) {
  const RaggedDot& op = plan.op();
  const std::size_t out_bytes = op.out().num_bytes();
  const std::size_t ws_bytes = plan.workspace_bytes();
  // One allocation, every piece 64-byte aligned, with room to misalign one.
  auto room = [](std::size_t b) { return (b + 64) / 64 * 64 + 64; };
  std::vector<unsigned char> storage(room(lhs.size()) + room(rhs.size()) + room(out_bytes) + room(ws_bytes) + 64);
  unsigned char* p = align64(storage.data());
  unsigned char* l = p;
  p += room(lhs.size());
  unsigned char* rr = p;
  p += room(rhs.size());
  unsigned char* o = p;
  p += room(out_bytes);
  unsigned char* w = p;
  std::memcpy(l, lhs.data(), lhs.size());
  std::memcpy(rr, rhs.data(), rhs.size());
  std::memcpy(o, poisoned.data(), out_bytes);

  ExecuteArgs a;
  a.lhs = {l, op.spec().lhs.num_bytes(), MemorySpace::kHost};
  a.rhs = {rr, op.spec().rhs.num_bytes(), MemorySpace::kHost};
  a.group_sizes = {gs.data(), op.spec().group_sizes.num_bytes(), MemorySpace::kHost};
  if (op.has_group_offset()) a.group_offset = {&offset, 4, MemorySpace::kHost};
  a.out = {o, out_bytes, MemorySpace::kHost};
  a.workspace = {ws_bytes ? w : nullptr, ws_bytes, MemorySpace::kHost};
  ExecuteReport report;
  a.report = &report;
  switch (fault % 16) {
    case 1: if (a.lhs.bytes) a.lhs.bytes -= 1; break;
    case 2: a.out.data = nullptr; break;
    case 3:  // rhs moved by 2 bytes: aligned to bf16/f16 elements only
      if (a.rhs.bytes) {
        std::memmove(rr + 2, rr, rhs.size());
        a.rhs.data = rr + 2;
      }
      break;
    case 4: if (a.workspace.bytes) a.workspace.bytes -= 1; break;
    case 5: if (a.group_sizes.bytes) a.group_sizes.bytes -= 1; break;
    case 6: if (a.lhs.bytes && a.out.bytes) a.out.data = l; break;  // out overlaps lhs
    case 7: a.group_sizes.space = MemorySpace::kDevice; break;
    case 8: a.group_offset = {}; break;
    default: break;
  }
  RunResult res;
  res.status = plan.execute(a);
  res.out.assign(o, o + out_bytes);
  return res;
}

void set_isa(std::uint8_t choice) {
  static const char* names[] = {nullptr, "scalar", "avx512", "avx512_bf16"};
  if (names[choice % 4]) setenv("RAGDOT_CPU_ISA", names[choice % 4], 1);
  else unsetenv("RAGDOT_CPU_ISA");
}

void fuzz_one(const std::uint8_t* data, std::size_t size) {
  Reader r(data, size);
  Input in = decode(r);
  auto op = RaggedDot::create(in.spec);
  if (!op.ok()) {
    expect_rejection(op.status(), "RaggedDot::create");
    return;
  }
  // Describing an accepted op must work.
  (void)op->to_string();
  (void)op->max_flops();

  PlanOptions ref_opts;
  ref_opts.backend = "cpu_ref";
  ref_opts.num_threads = 1;
  auto ref_plan = make_plan(*op, ref_opts);
  if (!ref_plan.ok()) fail("make_plan(cpu_ref)", "rejected an accepted op: " + ref_plan.status().to_string() + " for " + op->to_string());

  PlanOptions cpu_opts;
  cpu_opts.backend = "cpu";
  cpu_opts.num_threads = (in.exec_flags & 4) ? 2 : 1;
  set_isa(in.exec_flags);
  auto cpu_plan = make_plan(*op, cpu_opts);
  unsetenv("RAGDOT_CPU_ISA");
  if (!cpu_plan.ok()) {
    expect_rejection(cpu_plan.status(), "make_plan(cpu)");
  } else {
    (void)cpu_plan->to_string();
  }

  const auto& s = op->spec();
  // group sizes count too: an empty operand may come with a huge [b..., g] group sizes tensor
  const std::int64_t total = s.lhs.num_elements() + s.rhs.num_elements() + op->out().num_elements() +
                             s.group_sizes.num_elements();
  if (total > kMaxElements) return;
  if (cpu_plan.ok() && cpu_plan->workspace_bytes() > (std::size_t(1) << 22)) return;

  std::uint64_t seed = 1469598103934665603ull;
  for (std::size_t i = 0; i < size; ++i) seed = (seed ^ data[i]) * 1099511628211ull;
  std::vector<unsigned char> lhs(s.lhs.num_bytes() + 1), rhs(s.rhs.num_bytes() + 1);
  verify::fill_random(lhs.data(), s.lhs.dtype, s.lhs.num_elements(), seed);
  verify::fill_random(rhs.data(), s.rhs.dtype, s.rhs.num_elements(), seed + 1);
  const std::vector<unsigned char> gs = make_group_sizes(*op, in.gs_pattern, r);
  const std::int32_t offset = decode_offset(in.offset_byte, op->num_groups());
  const TensorSpec& out = op->out();
  std::vector<unsigned char> poisoned(out.num_bytes() + 1);
  verify::poison(poisoned.data(), out.dtype, out.num_elements());

  const std::uint8_t fault = in.exec_flags >> 3;
  RunResult ref = run(*ref_plan, lhs, rhs, gs, offset, poisoned, fault);
  auto check_failed = [&](const RunResult& res, const char* where) {
    expect_rejection(res.status, where);
    if (!res.out.empty() && std::memcmp(res.out.data(), poisoned.data(), res.out.size()) != 0) {
      fail(where, "a failed execute wrote to the output: " + res.status.to_string());
    }
  };
  if (!ref.status.is_ok()) check_failed(ref, "execute(cpu_ref)");
  if (!cpu_plan.ok()) return;
  RunResult got = run(*cpu_plan, lhs, rhs, gs, offset, poisoned, fault);
  // A short workspace only fails the backend that needs one (cpu_ref needs none).
  const bool short_workspace = fault % 16 == 4;
  if (short_workspace && cpu_plan->workspace_bytes() > 0 && got.status.is_ok()) {
    fail("execute(cpu)", "accepted a workspace one byte short");
  }
  if (!short_workspace && ref.status.is_ok() != got.status.is_ok()) {
    fail("execute", "cpu_ref says '" + ref.status.to_string() + "', cpu says '" + got.status.to_string() + "' for " +
                        op->to_string());
  }
  if (!got.status.is_ok() || !ref.status.is_ok()) {
    if (!got.status.is_ok()) check_failed(got, "execute(cpu)");
    return;
  }

  // Both ran: compare with the float64 oracle and with each other.
  auto oracle = cpu::ReferenceEvaluator::create(*op, lhs.data(), rhs.data(), gs.data(), &offset);
  if (!oracle.ok()) fail("oracle", "rejected what cpu_ref executed: " + oracle.status().to_string());
  // Errors are measured against the oracle of |lhs| x |rhs|: a sum that cancels has a small
  // result but keeps the rounding errors of its terms.
  std::vector<unsigned char> lhs_abs = lhs, rhs_abs = rhs;
  for (std::int64_t i = 0; i < s.lhs.num_elements(); ++i)
    cpu::store_from_double(lhs_abs.data(), s.lhs.dtype, i, std::fabs(cpu::load_as_double(lhs.data(), s.lhs.dtype, i)));
  for (std::int64_t i = 0; i < s.rhs.num_elements(); ++i)
    cpu::store_from_double(rhs_abs.data(), s.rhs.dtype, i, std::fabs(cpu::load_as_double(rhs.data(), s.rhs.dtype, i)));
  auto magnitude = cpu::ReferenceEvaluator::create(*op, lhs_abs.data(), rhs_abs.data(), gs.data(), &offset);
  if (!magnitude.ok()) fail("oracle", magnitude.status().to_string());
  std::int64_t k = 1;
  for (auto c : s.dims.dot.lhs_contracting) k *= s.lhs.shape[std::size_t(c)];
  const double tol = verify::tolerance_for(out.dtype, k);
  // (products of arbitrary inputs may land among the output dtype's subnormals: each element is
  // first forgiven the rounding there, against the oracle, and one subnormal step between backends)
  const double floor = verify::subnormal_rounding_for(out.dtype);
  auto beyond = [](double d, double allowed) { return std::max(0.0, std::fabs(d) - allowed); };
  double err2 = 0, diff2 = 0, mag2 = 0;
  for (std::int64_t i = 0; i < out.num_elements(); ++i) {
    const double o = oracle->at(i);
    const double c = cpu::load_as_double(got.out.data(), out.dtype, i);
    const double rf = cpu::load_as_double(ref.out.data(), out.dtype, i);
    if (std::isnan(c) || std::isnan(rf)) {
      fail("output", "element " + std::to_string(i) + " is NaN for " + op->to_string());
    }
    if (o == 0.0 && (c != 0.0 || rf != 0.0)) {
      fail("output", "element " + std::to_string(i) + " must be exactly 0 for " + op->to_string());
    }
    const double e = beyond(c - o, floor), d = beyond(c - rf, 2 * floor);
    err2 += e * e;
    diff2 += d * d;
    const double m = magnitude->at(i);
    mag2 += m * m;
  }
  const double err = mag2 > 0 ? std::sqrt(err2 / mag2) : std::sqrt(err2);
  const double diff = mag2 > 0 ? std::sqrt(diff2 / mag2) : std::sqrt(diff2);
  if (!(err <= tol) || !(diff <= 2 * tol)) {
    fail("output", "cpu differs (oracle " + std::to_string(err) + ", cpu_ref " + std::to_string(diff) +
                       ", tolerance " + std::to_string(tol) + ") for " + op->to_string() + " on " +
                       cpu_plan->to_string());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz_one(data, size);
  return 0;
}
