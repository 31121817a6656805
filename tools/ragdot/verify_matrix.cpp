#include "verify_matrix.hpp"

namespace ragdot::cli {

namespace {

constexpr verify::GroupPattern kPatterns[] = {
    verify::GroupPattern::kRandom,   verify::GroupPattern::kZeros,   verify::GroupPattern::kAllInOne,
    verify::GroupPattern::kPartialSum, verify::GroupPattern::kAllEmpty, verify::GroupPattern::kUniform,
    verify::GroupPattern::kPrimes};

// Odd sizes, larger than one register tile in every dimension, so that kernels run their blocked
// paths and their edges; small enough that the float64 oracle takes milliseconds.
constexpr std::int64_t kGridM = 97, kGridK = 70, kGridN = 45, kGridGroups = 6;
constexpr std::int64_t kGridBatch = 11;  // mode 3: the extent the groups split

}  // namespace

std::vector<MatrixCase> build_matrix(const MatrixOptions& o) {
  std::vector<MatrixCase> cases;
  verify::CaseOptions random_options;
  random_options.mode = o.mode;
  random_options.dtype = o.dtype;
  random_options.max_dim = o.max_dim;
  for (int i = 0; i < o.random_cases; ++i) {
    const std::uint64_t seed = o.seed * 1000003u + std::uint64_t(i);
    cases.push_back({verify::random_case(seed, random_options), seed, "random"});
  }
  if (!o.pattern_grid) return cases;

  workloads::SplitMix64 rng(o.seed ^ 0x5eedf00dull);
  std::vector<DType> dtypes = {DType::kF32, DType::kBF16, DType::kF16};
  if (o.dtype) dtypes = {*o.dtype};
  std::uint64_t serial = 0;
  for (int mode = 1; mode <= 3; ++mode) {
    if (o.mode != 0 && mode != o.mode) continue;
    const std::int64_t extent = mode == 1 ? kGridM : mode == 2 ? kGridK : kGridBatch;
    for (DType dt : dtypes) {
      for (verify::GroupPattern pattern : kPatterns) {
        const auto sizes = verify::make_group_sizes(pattern, kGridGroups, extent, rng);
        auto c = verify::shaped_case(mode, kGridM, kGridK, kGridN, sizes, dt);
        if (!c.ok()) continue;  // cannot happen for modes 1..3; a bad case is not worth an abort
        c->description.append(" ").append(dtype_name(dt)).append(" groups=").append(verify::group_pattern_name(pattern));
        cases.push_back({std::move(*c), o.seed * 7919u + serial++, "pattern"});
      }
    }
  }
  return cases;
}

}  // namespace ragdot::cli
