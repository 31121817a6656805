#include "verify/cases.hpp"

#include <algorithm>
#include <numeric>

namespace ragdot::verify {

using workloads::SplitMix64;

namespace {

std::int64_t uniform_int(SplitMix64& rng, std::int64_t lo, std::int64_t hi) {  // [lo, hi]
  if (hi <= lo) return lo;
  return lo + std::int64_t(rng.next() % std::uint64_t(hi - lo + 1));
}

template <class T>
void shuffle(std::vector<T>& v, SplitMix64& rng) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[std::size_t(rng.next() % i)]);
}

bool is_prime(std::int64_t x) {
  if (x < 2) return false;
  for (std::int64_t d = 2; d * d <= x; ++d) {
    if (x % d == 0) return false;
  }
  return true;
}

}  // namespace

const char* group_pattern_name(GroupPattern p) {
  switch (p) {
    case GroupPattern::kRandom: return "random";
    case GroupPattern::kZeros: return "zeros";
    case GroupPattern::kAllInOne: return "all-in-one";
    case GroupPattern::kPartialSum: return "partial-sum";
    case GroupPattern::kAllEmpty: return "all-empty";
    case GroupPattern::kUniform: return "uniform";
    case GroupPattern::kPrimes: return "primes";
  }
  return "?";
}

std::vector<std::int64_t> make_group_sizes(GroupPattern pattern, std::int64_t count, std::int64_t extent,
                                           SplitMix64& rng) {
  std::vector<std::int64_t> s(static_cast<std::size_t>(std::max<std::int64_t>(count, 0)), 0);
  if (count <= 0) return s;
  auto random_split = [&](std::int64_t total, double zero_prob) {
    // cut points, then sizes; some groups forced empty
    std::vector<std::int64_t> cuts;
    for (std::int64_t i = 0; i + 1 < count; ++i) cuts.push_back(uniform_int(rng, 0, total));
    std::sort(cuts.begin(), cuts.end());
    std::int64_t prev = 0;
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t c = i + 1 < count ? cuts[std::size_t(i)] : total;
      s[std::size_t(i)] = c - prev;
      prev = c;
    }
    for (std::int64_t i = 0; i < count; ++i) {
      if (rng.uniform() < zero_prob && i + 1 < count) {
        s[std::size_t(i + 1)] += s[std::size_t(i)];
        s[std::size_t(i)] = 0;
      }
    }
  };
  switch (pattern) {
    case GroupPattern::kRandom: random_split(extent, 0.2); break;
    case GroupPattern::kZeros: random_split(extent, 0.7); break;
    case GroupPattern::kAllInOne: s[std::size_t(uniform_int(rng, 0, count - 1))] = extent; break;
    case GroupPattern::kPartialSum: random_split(extent > 0 ? uniform_int(rng, 0, extent - 1) : 0, 0.2); break;
    case GroupPattern::kAllEmpty: break;
    case GroupPattern::kUniform:
      for (auto& x : s) x = extent / count;
      break;
    case GroupPattern::kPrimes: {
      std::int64_t left = extent;
      for (auto& x : s) {
        std::int64_t p = std::min<std::int64_t>(left, uniform_int(rng, 1, std::max<std::int64_t>(extent / count * 2, 2)));
        while (p > 1 && !is_prime(p)) --p;
        x = std::max<std::int64_t>(p, 0);
        left -= x;
      }
      break;
    }
  }
  return s;
}

Case random_case(std::uint64_t seed, const CaseOptions& o) {
  SplitMix64 rng(seed * 0x9e3779b97f4a7c15ull + 17);
  Case c;
  const int mode = o.mode ? o.mode : int(uniform_int(rng, 1, 3));
  const DType dts[] = {DType::kF32, DType::kBF16, DType::kF16};
  const DType dt = o.dtype ? *o.dtype : dts[uniform_int(rng, 0, 2)];
  const bool gen = o.general_dims;
  auto dim = [&](std::int64_t lo) { return uniform_int(rng, lo, o.max_dim); };
  const int nb = gen ? int(uniform_int(rng, 0, 2)) : (mode == 3 ? 1 : 0);
  const int nm = gen ? int(uniform_int(rng, 1, 2)) : 1;
  const int nk = gen ? int(uniform_int(rng, 1, 2)) : 1;
  const int nn = gen ? int(uniform_int(rng, 0, 2)) : 1;
  const std::int64_t g = uniform_int(rng, 0, 9) == 0 ? 1 : uniform_int(rng, 1, 7);

  // logical dims: lhs = batch + m + k; rhs = (group) + batch + k + n
  std::vector<std::int64_t> bs, ms, ks, ns;
  for (int i = 0; i < std::max(nb, mode == 3 ? 1 : 0); ++i) bs.push_back(uniform_int(rng, 1, 4));
  for (int i = 0; i < nm; ++i) ms.push_back(i == 0 ? dim(0) : uniform_int(rng, 1, 3));
  for (int i = 0; i < nk; ++i) ks.push_back(i == 0 ? dim(0) : uniform_int(rng, 1, 3));
  for (int i = 0; i < nn; ++i) ns.push_back(uniform_int(rng, 1, std::max<std::int64_t>(o.max_dim / 2, 1)));
  // occasionally large enough that kernels take their fast, blocked paths
  if (!gen || uniform_int(rng, 0, 3) == 0) {
    ms[0] = uniform_int(rng, 0, 130);
    ks[0] = uniform_int(rng, 1, 100);
    if (!ns.empty()) ns[0] = uniform_int(rng, 1, 80);
  }

  // Order the lhs axes: kinds are 0 batch, 1 m, 2 k; `which` is the index within the kind.
  struct Ax { int kind; int which; };
  std::vector<Ax> lax, rax;
  for (int i = 0; i < int(bs.size()); ++i) lax.push_back({0, i});
  for (int i = 0; i < nm; ++i) lax.push_back({1, i});
  for (int i = 0; i < nk; ++i) lax.push_back({2, i});
  if (mode == 1) rax.push_back({4, 0});
  for (int i = 0; i < int(bs.size()); ++i) rax.push_back({0, i});
  for (int i = 0; i < nk; ++i) rax.push_back({2, i});
  for (int i = 0; i < nn; ++i) rax.push_back({3, i});
  if (gen) {
    shuffle(lax, rng);
    shuffle(rax, rng);
  } else if (mode == 2) {
    // [k, m] x [k, n], the weight-gradient form
    lax = {{2, 0}, {1, 0}};
  }
  auto size_of = [&](const Ax& a) -> std::int64_t {
    switch (a.kind) {
      case 0: return bs[std::size_t(a.which)];
      case 1: return ms[std::size_t(a.which)];
      case 2: return ks[std::size_t(a.which)];
      case 3: return ns[std::size_t(a.which)];
      default: return g;
    }
  };
  auto pos = [](const std::vector<Ax>& v, int kind, int which) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i].kind == kind && v[i].which == which) return std::int64_t(i);
    }
    return std::int64_t(-1);
  };
  RaggedDotSpec& s = c.spec;
  s.lhs.dtype = s.rhs.dtype = dt;
  for (const auto& a : lax) s.lhs.shape.push_back(size_of(a));
  for (const auto& a : rax) s.rhs.shape.push_back(size_of(a));
  s.dims.dot = {};
  s.dims.rhs_group.clear();
  for (int i = 0; i < int(bs.size()); ++i) {
    s.dims.dot.lhs_batch.push_back(pos(lax, 0, i));
    s.dims.dot.rhs_batch.push_back(pos(rax, 0, i));
  }
  std::vector<int> korder(static_cast<std::size_t>(nk));
  std::iota(korder.begin(), korder.end(), 0);
  if (gen) shuffle(korder, rng);
  for (int i : korder) {
    s.dims.dot.lhs_contracting.push_back(pos(lax, 2, i));
    s.dims.dot.rhs_contracting.push_back(pos(rax, 2, i));
  }
  std::int64_t ragged;
  switch (mode) {
    case 1: ragged = pos(lax, 1, int(uniform_int(rng, 0, nm - 1))); break;
    case 2: ragged = s.dims.dot.lhs_contracting[std::size_t(uniform_int(rng, 0, nk - 1))]; break;
    default: ragged = s.dims.dot.lhs_batch[std::size_t(uniform_int(rng, 0, std::int64_t(bs.size()) - 1))]; break;
  }
  s.dims.lhs_ragged = {ragged};
  if (mode == 1) s.dims.rhs_group = {pos(rax, 4, 0)};
  if (uniform_int(rng, 0, 3) == 0) s.preferred_element_type = dts[uniform_int(rng, 0, 2)];

  // group sizes: [g] or [prefix..., g]; each row sums to at most the ragged extent
  RaggedMode rm = mode == 1 ? RaggedMode::kNonContracting : mode == 2 ? RaggedMode::kContracting : RaggedMode::kBatch;
  std::vector<std::int64_t> gshape;
  if (gen && uniform_int(rng, 0, 1) == 1) {
    // prefix dims as JAX defines them
    const auto& d = s.dims.dot;
    std::vector<std::int64_t> free;
    for (std::int64_t i = 0; i < s.lhs.rank(); ++i) {
      if (std::find(d.lhs_contracting.begin(), d.lhs_contracting.end(), i) == d.lhs_contracting.end() &&
          std::find(d.lhs_batch.begin(), d.lhs_batch.end(), i) == d.lhs_batch.end())
        free.push_back(i);
    }
    std::vector<std::int64_t> prefix;
    auto before = [&](const std::vector<std::int64_t>& v) {
      std::vector<std::int64_t> p;
      for (auto x : v) {
        if (x == ragged) break;
        p.push_back(x);
      }
      return p;
    };
    if (rm == RaggedMode::kBatch) {
      prefix = before(d.lhs_batch);
    } else {
      prefix = d.lhs_batch;
      auto tail = before(rm == RaggedMode::kNonContracting ? free : d.lhs_contracting);
      prefix.insert(prefix.end(), tail.begin(), tail.end());
    }
    for (auto p : prefix) gshape.push_back(s.lhs.shape[std::size_t(p)]);
  }
  gshape.push_back(g);
  s.group_sizes = {uniform_int(rng, 0, 1) ? DType::kI32 : DType::kI64, gshape};
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < gshape.size(); ++i) rows *= gshape[i];
  const GroupPattern pats[] = {GroupPattern::kRandom,     GroupPattern::kZeros,    GroupPattern::kAllInOne,
                               GroupPattern::kPartialSum, GroupPattern::kAllEmpty, GroupPattern::kUniform,
                               GroupPattern::kPrimes};
  const GroupPattern pat = pats[uniform_int(rng, 0, 6)];
  for (std::int64_t r = 0; r < rows; ++r) {
    auto row = make_group_sizes(pat, g, s.lhs.shape[std::size_t(ragged)], rng);
    c.group_sizes.insert(c.group_sizes.end(), row.begin(), row.end());
  }
  if (o.allow_group_offset && mode != 3 && g > 1 && uniform_int(rng, 0, 4) == 0) {
    const std::int64_t local = uniform_int(rng, 1, g);
    const std::int64_t off = uniform_int(rng, 0, g - local);
    s.group_offset = GroupOffset{local};
    c.group_offset = std::int32_t(off);
    if (mode == 1) s.rhs.shape[std::size_t(s.dims.rhs_group[0])] = local;
  }
  c.description = "seed=" + std::to_string(seed) + " mode=" + std::to_string(mode) + " " + s.lhs.to_string() + " x " +
                  s.rhs.to_string() + " gs=" + s.group_sizes.to_string() + " " + s.dims.to_string() + " groups=" +
                  group_pattern_name(pat) + (s.group_offset ? " offset=" + std::to_string(*c.group_offset) : "");
  return c;
}

RaggedDotSpec batched_forward_spec(std::int64_t batches, std::int64_t m, std::int64_t k, std::int64_t n,
                                   std::int64_t groups, DType dtype) {
  RaggedDotSpec s;
  s.lhs = {dtype, {batches, m, k}};
  s.rhs = {dtype, {batches, groups, k, n}};
  s.group_sizes = {DType::kI32, {groups}};
  s.dims.dot = {{2}, {2}, {0}, {0}};
  s.dims.lhs_ragged = {1};
  s.dims.rhs_group = {1};
  return s;
}

Result<Case> shaped_case(int mode, std::int64_t m, std::int64_t k, std::int64_t n,
                         const std::vector<std::int64_t>& group_sizes, DType dtype, std::optional<DType> out_dtype) {
  Case c;
  const std::int64_t g = std::int64_t(group_sizes.size());
  RaggedDotSpec& s = c.spec;
  s.lhs.dtype = s.rhs.dtype = dtype;
  s.preferred_element_type = out_dtype;
  s.group_sizes = {DType::kI32, {g}};
  s.dims.dot = {};
  s.dims.rhs_group.clear();
  switch (mode) {
    case 1:
      s = RaggedDotSpec{{dtype, {m, k}}, {dtype, {g, k, n}}, {DType::kI32, {g}}, RaggedDotDimensionNumbers::ragged_dot(),
                        out_dtype, std::nullopt};
      break;
    case 2:
      s.lhs.shape = {k, m};
      s.rhs.shape = {k, n};
      s.dims.dot.lhs_contracting = {0};
      s.dims.dot.rhs_contracting = {0};
      s.dims.lhs_ragged = {0};
      break;
    case 3: {
      std::int64_t b = 0;
      for (auto x : group_sizes) b += x;
      b = std::max<std::int64_t>(b, 1);
      s.lhs.shape = {b, m, k};
      s.rhs.shape = {b, k, n};
      s.dims.dot.lhs_batch = {0};
      s.dims.dot.rhs_batch = {0};
      s.dims.dot.lhs_contracting = {2};
      s.dims.dot.rhs_contracting = {1};
      s.dims.lhs_ragged = {0};
      break;
    }
    default: return invalid_argument("mode must be 1, 2 or 3");
  }
  c.group_sizes = group_sizes;
  c.description = "mode=" + std::to_string(mode) + " " + s.lhs.to_string() + " x " + s.rhs.to_string() +
                  " groups=" + std::to_string(g);
  return c;
}

std::vector<Case> empty_dimension_cases(DType dtype) {
  const struct {
    int mode;
    std::int64_t m, k, n;
    std::vector<std::int64_t> gs;
    const char* what;
  } forms[] = {{1, 0, 64, 128, {0, 0, 0}, "no rows"},
               {1, 100, 0, 128, {40, 0, 60}, "empty contraction: zeros"},
               {1, 100, 64, 0, {40, 0, 60}, "no columns"},
               {2, 64, 0, 128, {0, 0, 0}, "no token rows: zeros"},
               {2, 0, 100, 128, {40, 0, 60}, "no rows of the weight gradient"},
               {2, 64, 100, 0, {40, 0, 60}, "no columns of the weight gradient"}};
  std::vector<Case> out;
  for (const auto& f : forms) {
    auto c = shaped_case(f.mode, f.m, f.k, f.n, f.gs, dtype);
    if (!c.ok()) continue;  // (every form is valid; the tests count them)
    c->description += std::string(" (") + f.what + ")";
    out.push_back(std::move(*c));
  }
  return out;
}

}  // namespace ragdot::verify
