// describe: validation and shape inference for ragged_dot_general, following JAX's rules.
#include "ragdot/op.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "core/dims.hpp"
#include "core/element_limit.hpp"

namespace ragdot {

namespace {

std::string list_to_string(const std::vector<std::int64_t>& v) { return core::dims_to_string(v); }

Status check_in_range(const std::vector<std::int64_t>& dims, std::int64_t rank, const char* what,
                      const char* operand) {
  for (auto d : dims) {
    if (d < 0 || d >= rank) {
      return invalid_argument(std::string(what) + " dimension " + std::to_string(d) + " is out of range for " +
                              operand + " of rank " + std::to_string(rank));
    }
  }
  return Status::ok();
}

Status check_distinct(const std::vector<std::int64_t>& dims, const char* what) {
  std::set<std::int64_t> s(dims.begin(), dims.end());
  if (s.size() != dims.size()) {
    return invalid_argument(std::string(what) + " dimensions must be distinct, got " + list_to_string(dims));
  }
  return Status::ok();
}

bool contains(const std::vector<std::int64_t>& v, std::int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

Status check_tensor(const TensorSpec& t, const char* name) {
  for (std::size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] < 0) {
      return invalid_argument(std::string(name) + " dimension " + std::to_string(i) + " has negative size " +
                              std::to_string(t.shape[i]));
    }
  }
  // element and byte counts (and strides) must fit in int64 so no later arithmetic overflows
  if (!core::elements_fit(t.shape.data(), t.shape.data() + t.shape.size())) {
    return invalid_argument(std::string(name) + " " + t.to_string() + " has too many elements");
  }
  return Status::ok();
}

bool is_operand_dtype(DType dt) { return dt == DType::kF32 || dt == DType::kF16 || dt == DType::kBF16; }

}  // namespace

RaggedDotDimensionNumbers RaggedDotDimensionNumbers::ragged_dot() {
  RaggedDotDimensionNumbers d;
  d.dot.lhs_contracting = {1};
  d.dot.rhs_contracting = {1};
  d.lhs_ragged = {0};
  d.rhs_group = {0};
  return d;
}

std::string RaggedDotDimensionNumbers::to_string() const {
  std::ostringstream os;
  os << "contract=" << list_to_string(dot.lhs_contracting) << "x" << list_to_string(dot.rhs_contracting)
     << " batch=" << list_to_string(dot.lhs_batch) << "x" << list_to_string(dot.rhs_batch)
     << " ragged=" << list_to_string(lhs_ragged) << " group=" << list_to_string(rhs_group);
  return os.str();
}

const char* ragged_mode_name(RaggedMode mode) {
  switch (mode) {
    case RaggedMode::kNonContracting: return "ragged-noncontracting";
    case RaggedMode::kContracting: return "ragged-contracting";
    case RaggedMode::kBatch: return "ragged-batch";
  }
  return "?";
}

Result<DType> infer_output_dtype(DType lhs, DType rhs, std::optional<DType> preferred) {
  if (!is_operand_dtype(lhs)) return unsupported("lhs dtype " + std::string(dtype_name(lhs)) + " is not one of f32, bf16, f16");
  if (!is_operand_dtype(rhs)) return unsupported("rhs dtype " + std::string(dtype_name(rhs)) + " is not one of f32, bf16, f16");
  // JAX orders floating types by (max exponent, mantissa bits): f32 > bf16 > f16.
  auto rank = [](DType d) { return d == DType::kF32 ? 2 : d == DType::kBF16 ? 1 : 0; };
  DType result = rank(lhs) >= rank(rhs) ? lhs : rhs;
  if (preferred) {
    if (!is_operand_dtype(*preferred)) {
      return unsupported("preferred_element_type " + std::string(dtype_name(*preferred)) +
                         " is not one of f32, bf16, f16");
    }
    result = *preferred;
  }
  return result;
}

std::int64_t RaggedDot::computed_groups() const {
  return spec_.group_offset ? spec_.group_offset->local_groups : num_groups_;
}

double RaggedDot::max_flops() const {
  // Every (batch, m, n) output point meets each contracting index once; mode 2's leading group
  // dimension splits the contraction rather than multiplying it.
  double k = 1;
  for (auto c : spec_.dims.dot.lhs_contracting) k *= double(spec_.lhs.shape[c]);
  double points = 1;
  for (std::size_t i = (mode_ == RaggedMode::kContracting ? 1 : 0); i < out_.shape.size(); ++i) points *= double(out_.shape[i]);
  return 2.0 * points * k;
}

std::string RaggedDot::to_string() const {
  std::ostringstream os;
  os << "ragged_dot_general(" << ragged_mode_name(mode_) << ", lhs=" << spec_.lhs.to_string()
     << ", rhs=" << spec_.rhs.to_string() << ", group_sizes=" << spec_.group_sizes.to_string() << ", "
     << spec_.dims.to_string();
  if (spec_.group_offset) os << ", local_groups=" << spec_.group_offset->local_groups;
  os << ") -> " << out_.to_string();
  return os.str();
}

Result<RaggedDot> RaggedDot::ragged_dot(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t g, DType dtype,
                                        std::optional<DType> out_dtype, DType group_sizes_dtype) {
  RaggedDotSpec spec;
  spec.lhs = {dtype, {m, k}};
  spec.rhs = {dtype, {g, k, n}};
  spec.group_sizes = {group_sizes_dtype, {g}};
  spec.preferred_element_type = out_dtype;
  return create(std::move(spec));
}

Result<RaggedDot> RaggedDot::create(RaggedDotSpec spec) {
  RAGDOT_RETURN_IF_ERROR(check_tensor(spec.lhs, "lhs"));
  RAGDOT_RETURN_IF_ERROR(check_tensor(spec.rhs, "rhs"));
  RAGDOT_RETURN_IF_ERROR(check_tensor(spec.group_sizes, "group_sizes"));

  const auto& dn = spec.dims;
  const auto& d = dn.dot;
  const std::int64_t lrank = spec.lhs.rank(), rrank = spec.rhs.rank();

  // dtypes
  DType out_dtype;
  RAGDOT_ASSIGN_OR_RETURN(out_dtype, infer_output_dtype(spec.lhs.dtype, spec.rhs.dtype, spec.preferred_element_type));
  if (!is_integer(spec.group_sizes.dtype)) {
    return unsupported("group_sizes dtype " + std::string(dtype_name(spec.group_sizes.dtype)) +
                       " is not int32 or int64");
  }

  // dot dimension numbers, as dot_general checks them
  RAGDOT_RETURN_IF_ERROR(check_in_range(d.lhs_contracting, lrank, "lhs contracting", "lhs"));
  RAGDOT_RETURN_IF_ERROR(check_in_range(d.lhs_batch, lrank, "lhs batch", "lhs"));
  RAGDOT_RETURN_IF_ERROR(check_in_range(d.rhs_contracting, rrank, "rhs contracting", "rhs"));
  RAGDOT_RETURN_IF_ERROR(check_in_range(d.rhs_batch, rrank, "rhs batch", "rhs"));
  if (d.lhs_batch.size() != d.rhs_batch.size()) {
    return invalid_argument("lhs and rhs must have the same number of batch dimensions, got lhs_batch " +
                            list_to_string(d.lhs_batch) + " and rhs_batch " + list_to_string(d.rhs_batch));
  }
  if (d.lhs_contracting.size() != d.rhs_contracting.size()) {
    return invalid_argument("lhs and rhs must have the same number of contracting dimensions, got " +
                            list_to_string(d.lhs_contracting) + " and " + list_to_string(d.rhs_contracting));
  }
  RAGDOT_RETURN_IF_ERROR(check_distinct(d.lhs_batch, "lhs batch"));
  RAGDOT_RETURN_IF_ERROR(check_distinct(d.rhs_batch, "rhs batch"));
  RAGDOT_RETURN_IF_ERROR(check_distinct(d.lhs_contracting, "lhs contracting"));
  RAGDOT_RETURN_IF_ERROR(check_distinct(d.rhs_contracting, "rhs contracting"));
  for (auto c : d.lhs_contracting) {
    if (contains(d.lhs_batch, c)) {
      return invalid_argument("lhs dimension " + std::to_string(c) + " is both a batch and a contracting dimension");
    }
  }
  for (auto c : d.rhs_contracting) {
    if (contains(d.rhs_batch, c)) {
      return invalid_argument("rhs dimension " + std::to_string(c) + " is both a batch and a contracting dimension");
    }
  }
  for (std::size_t i = 0; i < d.lhs_batch.size(); ++i) {
    auto ls = spec.lhs.shape[d.lhs_batch[i]], rs = spec.rhs.shape[d.rhs_batch[i]];
    if (ls != rs) {
      return invalid_argument("batch dimension pair " + std::to_string(i) + " (lhs dim " +
                              std::to_string(d.lhs_batch[i]) + ", rhs dim " + std::to_string(d.rhs_batch[i]) +
                              ") has sizes " + std::to_string(ls) + " and " + std::to_string(rs));
    }
  }
  for (std::size_t i = 0; i < d.lhs_contracting.size(); ++i) {
    auto ls = spec.lhs.shape[d.lhs_contracting[i]], rs = spec.rhs.shape[d.rhs_contracting[i]];
    if (ls != rs) {
      return invalid_argument("contracting dimension pair " + std::to_string(i) + " (lhs dim " +
                              std::to_string(d.lhs_contracting[i]) + ", rhs dim " +
                              std::to_string(d.rhs_contracting[i]) + ") has sizes " + std::to_string(ls) + " and " +
                              std::to_string(rs));
    }
  }

  // the ragged dimension decides the mode
  if (dn.lhs_ragged.size() != 1) {
    return invalid_argument("ragged_dot_general expects exactly one lhs ragged dimension, got " +
                            list_to_string(dn.lhs_ragged));
  }
  const std::int64_t ragged = dn.lhs_ragged[0];
  if (ragged < 0 || ragged >= lrank) {
    return invalid_argument("lhs ragged dimension " + std::to_string(ragged) + " is out of range for lhs of rank " +
                            std::to_string(lrank));
  }
  RaggedMode mode;
  if (contains(d.lhs_contracting, ragged)) {
    mode = RaggedMode::kContracting;
  } else if (contains(d.lhs_batch, ragged)) {
    mode = RaggedMode::kBatch;
  } else {
    mode = RaggedMode::kNonContracting;
  }

  // group_sizes: [g] or [prefix..., g]
  if (spec.group_sizes.rank() < 1) return invalid_argument("group_sizes must have rank >= 1, got a scalar");
  const std::int64_t num_groups = spec.group_sizes.shape.back();
  if (spec.group_sizes.rank() != 1) {
    auto prefix = core::ragged_prefix_dims(mode, lrank, ragged, d.lhs_batch, d.lhs_contracting);
    std::vector<std::int64_t> expected;
    for (auto p : prefix) expected.push_back(spec.lhs.shape[p]);
    expected.push_back(num_groups);
    if (expected != spec.group_sizes.shape) {
      return invalid_argument("group_sizes must have shape " + list_to_string(expected) + " (or [" +
                              std::to_string(num_groups) + "]), got " + list_to_string(spec.group_sizes.shape));
    }
  }

  // the rhs group dimension
  std::int64_t computed_groups = num_groups;
  if (spec.group_offset) {
    if (mode == RaggedMode::kBatch) {
      return invalid_argument("group_offset applies to ragged non-contracting and ragged contracting modes only");
    }
    computed_groups = spec.group_offset->local_groups;
    if (computed_groups < 0 || computed_groups > num_groups) {
      return invalid_argument("group_offset local_groups must be in [0, " + std::to_string(num_groups) + "], got " +
                              std::to_string(computed_groups));
    }
  }
  if (mode == RaggedMode::kNonContracting) {
    if (dn.rhs_group.size() != 1) {
      return invalid_argument("ragged non-contracting mode needs exactly one rhs group dimension, got " +
                              list_to_string(dn.rhs_group));
    }
    const std::int64_t gd = dn.rhs_group[0];
    if (gd < 0 || gd >= rrank) {
      return invalid_argument("rhs group dimension " + std::to_string(gd) + " is out of range for rhs of rank " +
                              std::to_string(rrank));
    }
    if (contains(d.rhs_batch, gd) || contains(d.rhs_contracting, gd)) {
      return invalid_argument("rhs group dimension " + std::to_string(gd) +
                              " must be distinct from the rhs batch and contracting dimensions");
    }
    if (spec.rhs.shape[gd] != computed_groups) {
      return invalid_argument("rhs group dimension " + std::to_string(gd) + " must have size " +
                              std::to_string(computed_groups) +
                              (spec.group_offset ? " (local_groups)" : " (the number of groups)") + ", got " +
                              std::to_string(spec.rhs.shape[gd]));
    }
  } else if (!dn.rhs_group.empty()) {
    return invalid_argument(std::string("rhs group dimensions must be empty when the lhs ragged dimension is ") +
                            (mode == RaggedMode::kContracting ? "contracting" : "a batch dimension") + ", got " +
                            list_to_string(dn.rhs_group));
  }

  // output: batch..., lhs free..., rhs free... (mode 2: groups first)
  TensorSpec out;
  out.dtype = out_dtype;
  if (mode == RaggedMode::kContracting) out.shape.push_back(computed_groups);
  for (auto b : d.lhs_batch) out.shape.push_back(spec.lhs.shape[b]);
  for (auto i : core::free_dims(lrank, d.lhs_contracting, d.lhs_batch, {})) out.shape.push_back(spec.lhs.shape[i]);
  for (auto i : core::free_dims(rrank, d.rhs_contracting, d.rhs_batch, dn.rhs_group)) out.shape.push_back(spec.rhs.shape[i]);
  RAGDOT_RETURN_IF_ERROR(check_tensor(out, "output"));

  RaggedDot op;
  op.spec_ = std::move(spec);
  op.mode_ = mode;
  op.out_ = std::move(out);
  op.num_groups_ = num_groups;
  return op;
}

}  // namespace ragdot
