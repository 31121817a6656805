#include "verify/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/cpu/reference.hpp"
#include "core/half.hpp"

namespace ragdot::verify {

namespace {

class HostMemory final : public MemoryOps {
 public:
  MemorySpace space() const override { return MemorySpace::kHost; }
  Result<void*> alloc(std::size_t bytes) override {
    void* p = std::aligned_alloc(64, (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64);
    if (!p) return resource_exhausted("host allocation of " + std::to_string(bytes) + " bytes failed");
    return p;
  }
  void free(void* p) override { std::free(p); }
  Status upload(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  Status download(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
    return Status::ok();
  }
};

// A buffer in the backend's memory space, freed on scope exit.
struct Buffer {
  MemoryOps* mem = nullptr;
  void* ptr = nullptr;
  std::size_t bytes = 0;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (ptr) mem->free(ptr);
  }
};

Status make(MemoryOps& mem, std::size_t bytes, Buffer& b) {
  b.mem = &mem;
  b.bytes = bytes;
  RAGDOT_ASSIGN_OR_RETURN(b.ptr, mem.alloc(bytes));
  return Status::ok();
}

}  // namespace

MemoryOps& host_memory() {
  static HostMemory m;
  return m;
}

double tolerance_for(DType out, std::int64_t k) {
  const double growth = std::sqrt(double(std::max<std::int64_t>(k, 1)));
  switch (out) {
    case DType::kF32: return 2e-6 * growth + 1e-6;
    case DType::kBF16: return 6e-3;
    case DType::kF16: return 1.2e-3;
    default: return 1e-9;
  }
}

double subnormal_rounding_for(DType out) {
  switch (out) {
    case DType::kF16: return std::ldexp(1.0, -25);
    case DType::kBF16: return std::ldexp(1.0, -134);
    case DType::kF32: return std::ldexp(1.0, -150);
    default: return 0.0;
  }
}

void fill_random(void* data, DType dtype, std::int64_t count, std::uint64_t seed) {
  workloads::SplitMix64 rng(seed);
  for (std::int64_t i = 0; i < count; ++i) {
    // nonzero values from [-1, 1) so that no product hides an unwritten element
    double v = 2.0 * rng.uniform() - 1.0;
    if (v == 0.0) v = 0.5;
    cpu::store_from_double(data, dtype, i, v);
  }
}

void poison(void* data, DType dtype, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) cpu::store_from_double(data, dtype, i, std::nan(""));
}

std::vector<unsigned char> encode_group_sizes(const Case& c) {
  const auto& spec = c.spec.group_sizes;
  std::vector<unsigned char> gs(spec.num_bytes() + 1);
  for (std::size_t i = 0; i < c.group_sizes.size(); ++i) {
    if (spec.dtype == DType::kI32) {
      const std::int32_t v = std::int32_t(c.group_sizes[i]);
      std::memcpy(gs.data() + i * 4, &v, 4);
    } else {
      std::memcpy(gs.data() + i * 8, &c.group_sizes[i], 8);
    }
  }
  return gs;
}

CheckResult check_case(const Case& c, const PlanOptions& options, std::uint64_t seed, MemoryOps& mem, int repeats) {
  CheckResult res;
  auto op = RaggedDot::create(c.spec);
  if (!op.ok()) {
    res.message = "invalid case: " + op.status().to_string();
    return res;
  }
  PlanOptions po = options;
  const bool gathered = !c.lhs_rows.empty();
  if (gathered) po.lhs_gather_rows = c.lhs_table_rows;
  if (c.swiglu) po.swiglu_epilogue = true;
  const bool scattered = !c.out_rows.empty();
  if (scattered) po.out_scatter_rows = c.out_table_rows;
  auto plan = make_plan(*op, po);
  if (!plan.ok()) {
    res.message = plan.status().to_string();
    return res;
  }
  res.plan = plan->to_string();
  const auto& s = c.spec;
  const TensorSpec& out_spec = op->out();
  // with the SwiGLU epilogue the plan writes half the product's columns (out [M, N / 2]); with
  // scattered rows it adds them into an f32 table [R, N]
  const std::int64_t n_cols = out_spec.rank() > 0 ? out_spec.shape.back() : 1;
  const std::int64_t out_elements = c.swiglu      ? out_spec.num_elements() / 2
                                    : scattered ? c.out_table_rows * n_cols
                                                : out_spec.num_elements();
  const DType out_type = scattered ? DType::kF32 : out_spec.dtype;
  const std::size_t out_bytes = std::size_t(out_elements) * dtype_size(out_type);
  if (scattered && (s.lhs.rank() != 2 || std::int64_t(c.out_rows.size()) != s.lhs.shape[0] ||
                    c.row_scales.size() != c.out_rows.size())) {
    res.message = "invalid case: out_rows and row_scales need a 2-D lhs and one entry per row";
    return res;
  }
  // host data
  // a scatter table is followed by a guard of known bytes: an index past the table must drop its
  // row, not write after the table
  constexpr std::size_t kGuardBytes = 256;
  constexpr unsigned char kGuard = 0x5a;
  const std::size_t guard = scattered ? kGuardBytes : 1;
  std::vector<unsigned char> lhs(s.lhs.num_bytes() + 1), rhs(s.rhs.num_bytes() + 1), out(out_bytes + guard, kGuard);
  fill_random(lhs.data(), s.lhs.dtype, s.lhs.num_elements(), seed * 2 + 1);
  fill_random(rhs.data(), s.rhs.dtype, s.rhs.num_elements(), seed * 2 + 2);
  // gathered: execute reads `table`; the oracle reads its rows gathered into `lhs` (zero rows where
  // an index is outside the table)
  std::vector<unsigned char> table;
  if (gathered) {
    if (s.lhs.rank() != 2 || std::int64_t(c.lhs_rows.size()) != s.lhs.shape[0]) {
      res.message = "invalid case: lhs_rows needs a 2-D lhs and one index per row";
      return res;
    }
    const std::size_t row_bytes = std::size_t(s.lhs.shape[1]) * dtype_size(s.lhs.dtype);
    table.resize(std::size_t(c.lhs_table_rows) * row_bytes + 1);
    fill_random(table.data(), s.lhs.dtype, c.lhs_table_rows * s.lhs.shape[1], seed * 2 + 1);
    std::fill(lhs.begin(), lhs.end(), 0);
    for (std::size_t i = 0; i < c.lhs_rows.size(); ++i) {
      const std::int64_t r = c.lhs_rows[i];
      if (r >= 0 && r < c.lhs_table_rows) std::memcpy(&lhs[i * row_bytes], &table[std::size_t(r) * row_bytes], row_bytes);
    }
  }
  // a scatter table starts with values the plan must add to; any other output is poisoned
  if (scattered) fill_random(out.data(), DType::kF32, out_elements, seed * 2 + 3);
  else poison(out.data(), out_type, out_elements);
  const std::vector<unsigned char> out_before = out;
  std::vector<unsigned char> gs = encode_group_sizes(c);
  const std::int32_t offset = c.group_offset.value_or(0);

  auto ref = cpu::ReferenceEvaluator::create(*op, lhs.data(), rhs.data(), gs.data(), c.group_offset ? &offset : nullptr);
  if (!ref.ok()) {
    res.message = "reference rejected the case: " + ref.status().to_string();
    return res;
  }

  // buffers where the backend runs
  Buffer dl, dr, dg, doff, dout, dws, drows, dscatter, dscales;
  const std::vector<unsigned char>& lhs_in = gathered ? table : lhs;
  Status st = make(mem, lhs_in.size(), dl);
  if (st.is_ok() && gathered) st = make(mem, c.lhs_rows.size() * 4, drows);
  if (st.is_ok() && gathered) st = mem.upload(drows.ptr, c.lhs_rows.data(), c.lhs_rows.size() * 4);
  if (st.is_ok() && scattered) st = make(mem, c.out_rows.size() * 4, dscatter);
  if (st.is_ok() && scattered) st = mem.upload(dscatter.ptr, c.out_rows.data(), c.out_rows.size() * 4);
  if (st.is_ok() && scattered) st = make(mem, c.row_scales.size() * 4, dscales);
  if (st.is_ok() && scattered) st = mem.upload(dscales.ptr, c.row_scales.data(), c.row_scales.size() * 4);
  if (st.is_ok()) st = make(mem, rhs.size(), dr);
  if (st.is_ok()) st = make(mem, gs.size(), dg);
  if (st.is_ok()) st = make(mem, 4, doff);
  if (st.is_ok()) st = make(mem, out.size(), dout);
  if (st.is_ok()) st = make(mem, plan->workspace_bytes() + 64, dws);
  if (st.is_ok()) st = mem.upload(dl.ptr, lhs_in.data(), lhs_in.size());
  if (st.is_ok()) st = mem.upload(dr.ptr, rhs.data(), rhs.size());
  if (st.is_ok()) st = mem.upload(dg.ptr, gs.data(), gs.size());
  if (st.is_ok()) st = mem.upload(doff.ptr, &offset, 4);
  if (st.is_ok()) st = mem.upload(dout.ptr, out.data(), out.size());
  if (!st.is_ok()) {
    res.message = st.to_string();
    return res;
  }
  const MemorySpace sp = mem.space();
  ExecuteArgs args;
  args.lhs = {dl.ptr, lhs_in.size() - 1, sp};
  if (gathered) args.lhs_rows = {drows.ptr, c.lhs_rows.size() * 4, sp};
  if (scattered) {
    args.out_rows = {dscatter.ptr, c.out_rows.size() * 4, sp};
    args.row_scales = {dscales.ptr, c.row_scales.size() * 4, sp};
  }
  args.rhs = {dr.ptr, s.rhs.num_bytes(), sp};
  args.group_sizes = {dg.ptr, s.group_sizes.num_bytes(), sp};
  if (c.group_offset) args.group_offset = {doff.ptr, 4, sp};
  args.out = {dout.ptr, out_bytes, sp};
  args.workspace = {dws.ptr, plan->workspace_bytes(), sp};
  args.stream = mem.stream();
  st = plan->execute(args);
  if (st.is_ok()) st = mem.synchronize();
  if (st.is_ok()) st = mem.download(out.data(), dout.ptr, out.size());
  if (!st.is_ok()) {
    res.message = "execute failed: " + st.to_string();
    return res;
  }
  if (scattered && std::any_of(out.begin() + std::ptrdiff_t(out_bytes), out.end(), [](unsigned char b) { return b != kGuard; })) {
    res.message = "the plan wrote past the end of the scatter table";
    return res;
  }
  // determinism: the same inputs again, on a poisoned output, must give the same bytes
  if (repeats > 1 && !scattered) {
    std::vector<unsigned char> first(out.begin(), out.begin() + std::ptrdiff_t(out_bytes));
    std::vector<unsigned char> again(out.size());
    poison(again.data(), out_type, out_elements);
    for (int r = 1; r < repeats; ++r) {
      st = mem.upload(dout.ptr, again.data(), out_bytes);
      if (st.is_ok()) st = plan->execute(args);
      if (st.is_ok()) st = mem.synchronize();
      std::vector<unsigned char> got(first.size());
      if (st.is_ok()) st = mem.download(got.data(), dout.ptr, got.size());
      if (!st.is_ok()) {
        res.message = "execute failed on run " + std::to_string(r) + ": " + st.to_string();
        return res;
      }
      const auto diff = std::mismatch(first.begin(), first.end(), got.begin());
      if (diff.first != first.end()) {
        res.message = "run " + std::to_string(r) + " differs from run 0 at byte " +
                      std::to_string(diff.first - first.begin()) + " (not deterministic)";
        return res;
      }
    }
  }

  // compare, against the oracle's product: all of it on all threads, except where a scattered
  // case samples table rows (at a layer's scale), which needs only its sampled rows' dots
  const std::int64_t stride = std::max<std::int64_t>(c.table_row_stride, 1);
  const bool sampled = scattered && stride > 1;
  const std::vector<double> product = sampled ? std::vector<double>() : ref->evaluate();
  const auto want = [&](std::int64_t i) { return sampled ? ref->at(i) : product[std::size_t(i)]; };
  const std::int64_t n = out_elements, half = c.swiglu ? n_cols / 2 : 0;
  // scattered: the table's first values plus each row, rounded to the output dtype and scaled
  std::vector<double> table_want;
  if (scattered) {
    table_want.resize(std::size_t(n));
    for (std::int64_t i = 0; i < n; ++i) table_want[std::size_t(i)] = cpu::load_as_double(out_before.data(), out_type, i);
    double scratch = 0;
    for (std::int64_t r = 0; r < s.lhs.shape[0]; ++r) {
      const std::int64_t to = c.out_rows[std::size_t(r)];
      if (to < 0 || to >= c.out_table_rows || to % stride != 0) continue;
      for (std::int64_t col = 0; col < n_cols; ++col) {
        cpu::store_from_double(&scratch, out_spec.dtype, 0, want(r * n_cols + col));
        table_want[std::size_t(to * n_cols + col)] +=
            cpu::load_as_double(&scratch, out_spec.dtype, 0) * double(c.row_scales[std::size_t(r)]);
      }
    }
  }
  double err2 = 0, ref2 = 0;
  std::int64_t bad_zero = -1, nan_at = -1;
  constexpr double kZeroSlack = 1e-6;  // far below a misplaced element: sums of k products of inputs in [-1, 1)
  for (std::int64_t i = 0; i < n; ++i) {
    const double r = scattered ? table_want[std::size_t(i)]
                     : c.swiglu
                         ? cpu::swiglu_of_stored(want(i / half * 2 * half + i % half),
                                                 want(i / half * 2 * half + half + i % half), out_spec.dtype)
                         : want(i);
    const double o = cpu::load_as_double(out.data(), out_type, i);
    if (std::isnan(o)) {
      if (nan_at < 0) nan_at = i;
      continue;
    }
    if (scattered && (i / n_cols) % stride != 0) continue;  // a table row the sample leaves out
    // an element that must be zero (rows no group covers, empty groups) but is not; a product that
    // is zero only by cancellation in float64 may come out as a tiny f32 residue (or, through the
    // SwiGLU epilogue, silu of that residue), which is not an unwritten or misplaced element
    if (r == 0.0 && std::abs(o) > kZeroSlack && bad_zero < 0) bad_zero = i;
    err2 += (o - r) * (o - r);
    ref2 += r * r;
  }
  std::int64_t k = 1;
  for (auto d : s.dims.dot.lhs_contracting) k *= s.lhs.shape[std::size_t(d)];
  res.tolerance = tolerance_for(out_spec.dtype, k);
  res.rel_error = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  if (nan_at >= 0) {
    res.message = "output element " + std::to_string(nan_at) + " is NaN (never written, or wrong)";
  } else if (bad_zero >= 0) {
    res.message = "output element " + std::to_string(bad_zero) + " should be exactly 0 but is " +
                  std::to_string(cpu::load_as_double(out.data(), out_type, bad_zero));
  } else if (!(res.rel_error <= res.tolerance)) {
    res.message = "relative error " + std::to_string(res.rel_error) + " exceeds " + std::to_string(res.tolerance);
  } else {
    res.passed = true;
  }
  return res;
}

}  // namespace ragdot::verify
