// canonicalize: RaggedDot -> GroupGemmProblem. Each logical dim (outer, m, n, k) collects the
// operand dims of its kind with their row-major strides; a kind merges into one stride when the
// dims are laid out one inside the other. An input operand that does not merge is relaid out.
#include <algorithm>
#include <array>
#include <numeric>
#include <sstream>

#include "core/dims.hpp"
#include "core/problem.hpp"

namespace ragdot::core {

namespace {

enum Operand { kLhs = 0, kRhs = 1, kOut = 2, kGs = 3 };

struct LDim {
  std::int64_t size = 1;
  std::array<std::int64_t, 4> stride{0, 0, 0, 0};
  std::array<bool, 4> in{false, false, false, false};
};

LDim make_dim(std::int64_t size) {
  LDim d;
  d.size = size;
  return d;
}
void set(LDim& d, Operand o, std::int64_t stride) {
  d.stride[o] = stride;
  d.in[o] = true;
}

// True when `dims` (outer first) address operand `o` as one strided axis.
bool mergeable(const std::vector<LDim>& dims, Operand o) {
  const LDim* inner = nullptr;
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    if (it->size == 1) continue;
    if (inner && it->stride[o] != inner->size * inner->stride[o]) return false;
    inner = &*it;
  }
  return true;
}

struct Axis {
  std::int64_t size = 1;
  std::int64_t stride = 1;
};

Axis merge(const std::vector<LDim>& dims, Operand o) {
  Axis a;
  bool found = false;
  for (const auto& d : dims) {
    a.size *= d.size;
    if (d.size != 1) {
      a.stride = d.stride[o];
      found = true;
    }
  }
  if (!found) a.stride = 1;
  return a;
}

// Rewrites operand `o`'s strides as if it were copied contiguously in the order of `groups`
// (each a list of logical dims); returns the copy's description in the caller's strides.
Relayout relayout(std::initializer_list<std::vector<LDim>*> groups, Operand o) {
  Relayout r;
  std::vector<LDim*> order;
  for (auto* g : groups) {
    for (auto& d : *g) {
      if (!d.in[o]) continue;
      order.push_back(&d);
      r.sizes.push_back(d.size);
      r.src_strides.push_back(d.stride[o]);
    }
  }
  auto strides = row_major_strides(r.sizes);
  for (std::size_t i = 0; i < order.size(); ++i) order[i]->stride[o] = strides[i];
  return r;
}

std::vector<OuterDim> to_outer(const std::vector<LDim>& dims) {
  std::vector<OuterDim> out;
  for (const auto& d : dims) {
    if (d.size == 1) continue;
    OuterDim od{d.size, d.stride[kLhs], d.stride[kRhs], d.stride[kOut], d.stride[kGs]};
    // Merge into the previous (outer) dim when every operand nests this one inside it.
    if (!out.empty()) {
      OuterDim& p = out.back();
      auto nests = [&](std::int64_t po, std::int64_t pi) { return po == od.size * pi; };
      if (nests(p.lhs, od.lhs) && nests(p.rhs, od.rhs) && nests(p.out, od.out) && nests(p.gs, od.gs)) {
        p.size *= od.size;
        p.lhs = od.lhs;
        p.rhs = od.rhs;
        p.out = od.out;
        p.gs = od.gs;
        continue;
      }
    }
    out.push_back(od);
  }
  return out;
}

}  // namespace

std::int64_t Relayout::elements() const {
  std::int64_t e = 1;
  for (auto s : sizes) e *= s;
  return e;
}

std::int64_t GroupGemmProblem::outer_count() const {
  std::int64_t c = 1;
  for (const auto& o : outer) c *= o.size;
  return c;
}

std::string GroupGemmProblem::to_string() const {
  std::ostringstream os;
  os << "mode=" << int(mode) << " outer=" << outer_count() << " m=" << m << " n=" << n << " k=" << k
     << " groups=" << computed_groups << "/" << num_groups << " unit=" << ragged_unit << " lhs(m,k)=(" << lhs_m << ","
     << lhs_k << ") rhs(g,k,n)=(" << rhs_g << "," << rhs_k << "," << rhs_n << ") out(g,m,n)=(" << out_g << ","
     << out_m << "," << out_n << ")";
  if (!reduce.empty()) os << " reduce-prefix";
  if (lhs_relayout) os << " relayout-lhs";
  if (rhs_relayout) os << " relayout-rhs";
  if (swiglu_epilogue) os << " swiglu-epilogue";
  if (out_scatter_rows) os << " scatter-add-rows=" << *out_scatter_rows;
  return os.str();
}

GroupGemmProblem canonicalize(const RaggedDot& op) {
  const auto& spec = op.spec();
  const auto& dn = spec.dims.dot;
  const RaggedMode mode = op.mode();
  const std::int64_t ragged = op.lhs_ragged_dim();
  const auto ls = row_major_strides(spec.lhs.shape);
  const auto rs = row_major_strides(spec.rhs.shape);
  const auto os = row_major_strides(op.out().shape);
  const auto gss = row_major_strides(spec.group_sizes.shape);
  const bool gs_rows = spec.group_sizes.rank() > 1 && mode != RaggedMode::kBatch;

  GroupGemmProblem p;
  p.mode = mode;
  p.lhs_dtype = spec.lhs.dtype;
  p.rhs_dtype = spec.rhs.dtype;
  p.out_dtype = op.out().dtype;
  p.gs_dtype = spec.group_sizes.dtype;
  p.num_groups = op.num_groups();
  p.computed_groups = op.computed_groups();
  p.has_group_offset = op.has_group_offset();
  p.lhs_elements = spec.lhs.num_elements();
  p.rhs_elements = spec.rhs.num_elements();
  p.out_elements = op.out().num_elements();
  p.gs_elements = spec.group_sizes.num_elements();

  std::vector<LDim> outer, reduce, mdims, ndims, kdims;
  std::int64_t out_pos = 0;
  if (mode == RaggedMode::kContracting) {
    p.out_g = os[0];
    out_pos = 1;
  }
  std::int64_t gs_pos = 0;
  for (std::size_t i = 0; i < dn.lhs_batch.size(); ++i) {
    LDim d = make_dim(spec.lhs.shape[dn.lhs_batch[i]]);
    set(d, kLhs, ls[dn.lhs_batch[i]]);
    set(d, kRhs, rs[dn.rhs_batch[i]]);
    set(d, kOut, os[out_pos++]);
    if (gs_rows) set(d, kGs, gss[gs_pos++]);
    outer.push_back(d);
  }
  const auto lfree = free_dims(spec.lhs.rank(), dn.lhs_contracting, dn.lhs_batch, {});
  bool past_ragged = mode != RaggedMode::kNonContracting;
  for (auto f : lfree) {
    if (f == ragged) past_ragged = true;
    LDim d = make_dim(spec.lhs.shape[f]);
    set(d, kLhs, ls[f]);
    set(d, kOut, os[out_pos++]);
    if (!past_ragged) {  // mode 1: a non-contracting dim ahead of the ragged one indexes group_sizes
      if (gs_rows) set(d, kGs, gss[gs_pos++]);
      outer.push_back(d);
    } else {
      mdims.push_back(d);
    }
  }
  for (auto f : free_dims(spec.rhs.rank(), dn.rhs_contracting, dn.rhs_batch, spec.dims.rhs_group)) {
    LDim d = make_dim(spec.rhs.shape[f]);
    set(d, kRhs, rs[f]);
    set(d, kOut, os[out_pos++]);
    ndims.push_back(d);
  }
  if (mode == RaggedMode::kNonContracting) p.rhs_g = rs[spec.dims.rhs_group[0]];

  // contracting pairs; mode 2 puts the ragged pair first and the pairs listed before it in `reduce`
  std::vector<LDim> pairs;
  std::size_t ragged_pair = 0;
  for (std::size_t i = 0; i < dn.lhs_contracting.size(); ++i) {
    LDim d = make_dim(spec.lhs.shape[dn.lhs_contracting[i]]);
    set(d, kLhs, ls[dn.lhs_contracting[i]]);
    set(d, kRhs, rs[dn.rhs_contracting[i]]);
    if (dn.lhs_contracting[i] == ragged) ragged_pair = i;
    pairs.push_back(d);
  }
  if (mode == RaggedMode::kContracting) {
    kdims.push_back(pairs[ragged_pair]);
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      if (i == ragged_pair) continue;
      if (i < ragged_pair && gs_rows) {
        // Group sizes that vary along a contracted dim: no single k range per group.
        LDim d = pairs[i];
        set(d, kGs, gss[gs_pos++]);
        reduce.push_back(d);
      } else {
        // With one group-size row, a contracted dim listed ahead of the ragged one can sit inside
        // it: each group then covers one k range (usually after a relayout).
        kdims.push_back(pairs[i]);
      }
    }
  } else {
    // Any order of the contracting pairs gives the same sum: take the one that merges best.
    auto by = [&](Operand o) {
      auto v = pairs;
      std::stable_sort(v.begin(), v.end(), [o](const LDim& a, const LDim& b) { return a.stride[o] > b.stride[o]; });
      return v;
    };
    std::vector<std::vector<LDim>> options = {pairs, by(kLhs), by(kRhs)};
    auto cost = [&](const std::vector<LDim>& k) {
      return int(!(mergeable(mdims, kLhs) && mergeable(k, kLhs))) + int(!(mergeable(k, kRhs) && mergeable(ndims, kRhs)));
    };
    kdims = *std::min_element(options.begin(), options.end(),
                              [&](const auto& a, const auto& b) { return cost(a) < cost(b); });
  }

  // ragged extent and unit
  if (mode == RaggedMode::kNonContracting) {
    p.ragged_extent = mdims.front().size;
    p.ragged_unit = 1;
    for (std::size_t i = 1; i < mdims.size(); ++i) p.ragged_unit *= mdims[i].size;
  } else if (mode == RaggedMode::kContracting) {
    p.ragged_extent = kdims.front().size;
    p.ragged_unit = 1;
    for (std::size_t i = 1; i < kdims.size(); ++i) p.ragged_unit *= kdims[i].size;
  } else {
    p.ragged_extent = spec.lhs.shape[ragged];
  }

  if (!(mergeable(mdims, kLhs) && mergeable(kdims, kLhs))) {
    p.lhs_relayout = relayout({&outer, &reduce, &mdims, &kdims}, kLhs);
  }
  if (!(mergeable(kdims, kRhs) && mergeable(ndims, kRhs))) {
    // The rhs copy keeps its group dim outermost.
    LDim g = make_dim(mode == RaggedMode::kNonContracting ? spec.rhs.shape[spec.dims.rhs_group[0]] : 1);
    set(g, kRhs, p.rhs_g);
    std::vector<LDim> group{g};
    p.rhs_relayout = relayout({&group, &outer, &reduce, &kdims, &ndims}, kRhs);
    p.rhs_g = group[0].stride[kRhs];
  }

  const Axis am = merge(mdims, kLhs), ak = merge(kdims, kLhs);
  const Axis bk = merge(kdims, kRhs), bn = merge(ndims, kRhs);
  const Axis cm = merge(mdims, kOut), cn = merge(ndims, kOut);
  p.m = am.size;
  p.k = ak.size;
  p.n = bn.size;
  p.lhs_m = am.stride;
  p.lhs_k = ak.stride;
  p.rhs_k = bk.stride;
  p.rhs_n = bn.stride;
  p.out_m = cm.stride;
  p.out_n = cn.stride;
  p.outer = to_outer(outer);
  for (const auto& d : reduce) p.reduce.push_back({d.size, d.stride[kLhs], d.stride[kRhs], 0, d.stride[kGs]});
  return p;
}

}  // namespace ragdot::core
