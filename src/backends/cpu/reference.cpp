#include "backends/cpu/reference.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <new>

#include "core/dims.hpp"
#include "core/env.hpp"
#include "core/half.hpp"

namespace ragdot::cpu {

double load_as_double(const void* base, DType dtype, std::int64_t index) {
  const char* p = static_cast<const char*>(base);
  switch (dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p + index * 4, 4);
      return f;
    }
    case DType::kF16: {
      std::uint16_t h;
      std::memcpy(&h, p + index * 2, 2);
      return core::f16_to_f32(h);
    }
    case DType::kBF16: {
      std::uint16_t h;
      std::memcpy(&h, p + index * 2, 2);
      return core::bf16_to_f32(h);
    }
    case DType::kF64: {
      double d;
      std::memcpy(&d, p + index * 8, 8);
      return d;
    }
    default: return 0.0;
  }
}

void store_from_double(void* base, DType dtype, std::int64_t index, double v) {
  char* p = static_cast<char*>(base);
  switch (dtype) {
    case DType::kF32: {
      float f = float(v);
      std::memcpy(p + index * 4, &f, 4);
      break;
    }
    case DType::kF16: {
      std::uint16_t h = core::f32_to_f16(float(v));
      std::memcpy(p + index * 2, &h, 2);
      break;
    }
    case DType::kBF16: {
      std::uint16_t h = core::f32_to_bf16(float(v));
      std::memcpy(p + index * 2, &h, 2);
      break;
    }
    case DType::kF64: std::memcpy(p + index * 8, &v, 8); break;
    default: break;
  }
}

float swiglu_of_stored(double gate, double up, DType dtype) {
  double scratch = 0;  // room for one element of any float dtype, to round through
  const auto as_stored = [&](double v) {
    store_from_double(&scratch, dtype, 0, v);
    return float(load_as_double(&scratch, dtype, 0));
  };
  const float g = as_stored(gate), u = as_stored(up);
  return g / (1.0f + std::exp(-g)) * u;
}

Result<ReferenceEvaluator> ReferenceEvaluator::create(const RaggedDot& op, const void* lhs, const void* rhs,
                                                      const void* group_sizes, const void* group_offset) {
  const auto& spec = op.spec();
  const auto& dn = spec.dims.dot;
  ReferenceEvaluator ev;
  ev.op_ = &op;
  ev.lhs_ = lhs;
  ev.rhs_ = rhs;
  ev.lhs_strides_ = core::row_major_strides(spec.lhs.shape);
  ev.rhs_strides_ = core::row_major_strides(spec.rhs.shape);
  ev.out_shape_ = op.out().shape;

  const RaggedMode mode = op.mode();
  const std::int64_t ragged = op.lhs_ragged_dim();
  if (mode != RaggedMode::kBatch && spec.group_sizes.rank() > 1) {
    ev.prefix_dims_ = core::ragged_prefix_dims(mode, spec.lhs.rank(), ragged, dn.lhs_batch, dn.lhs_contracting);
    for (auto d : ev.prefix_dims_) ev.prefix_sizes_.push_back(spec.lhs.shape[d]);
  }
  std::int64_t rows = 1;
  for (auto s : ev.prefix_sizes_) rows *= s;
  // Mode 3 is dot_general; its group sizes are still checked like JAX's shape rule allows them.
  const std::int64_t gs_rows = mode == RaggedMode::kBatch ? spec.group_sizes.num_elements() / std::max<std::int64_t>(op.num_groups(), 1) : rows;
  RAGDOT_RETURN_IF_ERROR(core::read_group_bounds(group_sizes, spec.group_sizes.dtype, op.num_groups() ? gs_rows : 0,
                                                 op.num_groups(), spec.lhs.shape[ragged], ev.bounds_));
  if (op.has_group_offset()) {
    RAGDOT_RETURN_IF_ERROR(
        core::read_group_offset(group_offset, op.computed_groups(), op.num_groups(), ev.group_offset_));
  }

  // out dims: [g (mode 2)] batch... lhs free... rhs free...
  if (mode == RaggedMode::kContracting) {
    ev.out_to_lhs_.push_back(-1);
    ev.out_to_rhs_.push_back(-1);
  }
  for (std::size_t i = 0; i < dn.lhs_batch.size(); ++i) {
    ev.out_to_lhs_.push_back(dn.lhs_batch[i]);
    ev.out_to_rhs_.push_back(dn.rhs_batch[i]);
  }
  for (auto f : core::free_dims(spec.lhs.rank(), dn.lhs_contracting, dn.lhs_batch, {})) {
    ev.out_to_lhs_.push_back(f);
    ev.out_to_rhs_.push_back(-1);
  }
  for (auto f : core::free_dims(spec.rhs.rank(), dn.rhs_contracting, dn.rhs_batch, spec.dims.rhs_group)) {
    ev.out_to_lhs_.push_back(-1);
    ev.out_to_rhs_.push_back(f);
  }
  for (std::size_t i = 0; i < dn.lhs_contracting.size(); ++i) {
    ev.k_sizes_.push_back(spec.lhs.shape[dn.lhs_contracting[i]]);
    ev.k_lhs_dim_.push_back(dn.lhs_contracting[i]);
    ev.k_rhs_dim_.push_back(dn.rhs_contracting[i]);
  }
  return ev;
}

double ReferenceEvaluator::at(std::int64_t flat) const {
  const auto& spec = op_->spec();
  const RaggedMode mode = op_->mode();
  const std::int64_t ragged = op_->lhs_ragged_dim();
  std::vector<std::int64_t> lidx(static_cast<std::size_t>(spec.lhs.rank()), 0), ridx(std::size_t(spec.rhs.rank()), 0);

  // decode the output index
  std::int64_t out_group = -1;
  for (std::int64_t d = std::int64_t(out_shape_.size()) - 1; d >= 0; --d) {
    const std::int64_t i = out_shape_[std::size_t(d)] ? flat % out_shape_[std::size_t(d)] : 0;
    flat = out_shape_[std::size_t(d)] ? flat / out_shape_[std::size_t(d)] : 0;
    if (out_to_lhs_[std::size_t(d)] >= 0) lidx[std::size_t(out_to_lhs_[std::size_t(d)])] = i;
    if (out_to_rhs_[std::size_t(d)] >= 0) ridx[std::size_t(out_to_rhs_[std::size_t(d)])] = i;
    if (out_to_lhs_[std::size_t(d)] < 0 && out_to_rhs_[std::size_t(d)] < 0) out_group = i;
  }

  auto gs_row = [&]() {
    std::int64_t row = 0;
    for (std::size_t i = 0; i < prefix_dims_.size(); ++i) row = row * prefix_sizes_[i] + lidx[std::size_t(prefix_dims_[i])];
    return row;
  };

  if (mode == RaggedMode::kNonContracting) {
    // Which computed group owns this row? None: the row is zero.
    const std::int64_t row = gs_row();
    const std::int64_t r = lidx[std::size_t(ragged)];
    std::int64_t local = -1;
    for (std::int64_t j = 0; j < op_->computed_groups(); ++j) {
      const std::int64_t gj = group_offset_ + j;
      if (bounds_.begin(row, gj) <= r && r < bounds_.end(row, gj)) {
        local = j;
        break;
      }
    }
    if (local < 0) return 0.0;
    ridx[std::size_t(spec.dims.rhs_group[0])] = local;
  }

  // contract over every k multi-index; in mode 2 the ragged dim (one of the contracting dims)
  // runs over the group's rows only, which are the only ones that contribute
  const std::size_t nk = k_sizes_.size();
  std::vector<std::int64_t> kidx(nk, 0);
  for (auto s : k_sizes_) {
    if (s == 0) return 0.0;
  }
  const std::int64_t global_group = out_group + group_offset_;
  std::size_t q = nk;  // the ragged dim's place among the contracting dims (nk: none)
  if (mode == RaggedMode::kContracting)
    for (std::size_t i = 0; i < nk; ++i)
      if (k_lhs_dim_[i] == ragged) q = i;
  auto product = [&]() {
    std::int64_t lo = 0, ro = 0;
    for (std::size_t i = 0; i < lidx.size(); ++i) lo += lidx[i] * lhs_strides_[i];
    for (std::size_t i = 0; i < ridx.size(); ++i) ro += ridx[i] * rhs_strides_[i];
    return load_as_double(lhs_, spec.lhs.dtype, lo) * load_as_double(rhs_, spec.rhs.dtype, ro);
  };
  double acc = 0.0;
  while (true) {
    for (std::size_t i = 0; i < nk; ++i) {
      if (i == q) continue;
      lidx[std::size_t(k_lhs_dim_[i])] = kidx[i];
      ridx[std::size_t(k_rhs_dim_[i])] = kidx[i];
    }
    if (q < nk) {
      const std::int64_t row = gs_row();
      const std::int64_t begin = std::max<std::int64_t>(bounds_.begin(row, global_group), 0);
      const std::int64_t end = std::min<std::int64_t>(bounds_.end(row, global_group), k_sizes_[q]);
      for (std::int64_t r = begin; r < end; ++r) {
        lidx[std::size_t(k_lhs_dim_[q])] = r;
        ridx[std::size_t(k_rhs_dim_[q])] = r;
        acc += product();
      }
    } else {
      acc += product();
    }
    // the next multi-index of the other contracting dims (the last fastest)
    bool wrapped = true;
    for (std::size_t d = nk; d-- > 0;) {
      if (d == q) continue;
      if (++kidx[d] < k_sizes_[d]) {
        wrapped = false;
        break;
      }
      kidx[d] = 0;
    }
    if (wrapped) return acc;
  }
}

std::vector<double> ReferenceEvaluator::evaluate() const {
  const std::int64_t n = op_->out().num_elements();
  std::vector<double> out(static_cast<std::size_t>(n));
  // The elements are independent and each is summed in the same order on any thread, so this is
  // what one thread gives, in a fraction of the time (checking a GPU's output spends most of its
  // time here). A failed allocation inside the loop is carried out of it, not left to terminate.
  std::atomic<bool> out_of_memory{false};
  const int threads = env::num_threads();
#pragma omp parallel for schedule(dynamic, 256) num_threads(threads) if (n >= 4096 && threads > 1)
  for (std::int64_t i = 0; i < n; ++i) {
    try {
      out[std::size_t(i)] = at(i);
    } catch (const std::bad_alloc&) {
      out_of_memory.store(true, std::memory_order_relaxed);
    }
  }
  if (out_of_memory.load()) throw std::bad_alloc();
  return out;
}

}  // namespace ragdot::cpu
