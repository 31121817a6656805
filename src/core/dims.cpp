#include "core/dims.hpp"

#include <algorithm>

namespace ragdot::core {

std::string dims_to_string(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s + "]";
}

std::vector<std::int64_t> free_dims(std::int64_t rank, const std::vector<std::int64_t>& a,
                                    const std::vector<std::int64_t>& b, const std::vector<std::int64_t>& c) {
  std::vector<std::int64_t> out;
  auto in = [](const std::vector<std::int64_t>& v, std::int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  for (std::int64_t i = 0; i < rank; ++i) {
    if (!in(a, i) && !in(b, i) && !in(c, i)) out.push_back(i);
  }
  return out;
}

std::vector<std::int64_t> ragged_prefix_dims(RaggedMode mode, std::int64_t rank, std::int64_t ragged,
                                             const std::vector<std::int64_t>& batch,
                                             const std::vector<std::int64_t>& contracting) {
  std::vector<std::int64_t> out;
  auto prefix_of = [&](const std::vector<std::int64_t>& v) {
    std::vector<std::int64_t> p;
    for (auto x : v) {
      if (x == ragged) break;
      p.push_back(x);
    }
    return p;
  };
  switch (mode) {
    case RaggedMode::kNonContracting: {
      out = batch;
      auto nc = prefix_of(free_dims(rank, contracting, batch, {}));
      out.insert(out.end(), nc.begin(), nc.end());
      break;
    }
    case RaggedMode::kContracting: {
      out = batch;
      auto c = prefix_of(contracting);
      out.insert(out.end(), c.begin(), c.end());
      break;
    }
    case RaggedMode::kBatch:
      out = prefix_of(batch);
      break;
  }
  return out;
}

std::vector<std::int64_t> row_major_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::int64_t i = std::int64_t(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

}  // namespace ragdot::core
