#include "plan_cache.hpp"

#include <mutex>
#include <sstream>
#include <unordered_map>

namespace ragdot::python {

namespace {

void put_list(std::ostringstream& os, const std::vector<std::int64_t>& v) {
  os << '[';
  for (auto x : v) os << x << ',';
  os << ']';
}

// Everything make_plan depends on, as one string.
std::string signature_key(const RaggedDotSpec& s, const PlanTarget& t) {
  std::ostringstream os;
  os << s.lhs.to_string() << s.rhs.to_string() << s.group_sizes.to_string();
  put_list(os, s.dims.dot.lhs_contracting);
  put_list(os, s.dims.dot.rhs_contracting);
  put_list(os, s.dims.dot.lhs_batch);
  put_list(os, s.dims.dot.rhs_batch);
  put_list(os, s.dims.lhs_ragged);
  put_list(os, s.dims.rhs_group);
  os << (s.preferred_element_type ? dtype_name(*s.preferred_element_type) : "-") << '|';
  os << (s.group_offset ? s.group_offset->local_groups : -1) << '|';
  os << (t.memory_space ? memory_space_name(*t.memory_space) : "-") << '|' << t.backend << '|' << t.device;
  os << '|' << t.lhs_gather_rows.value_or(-1);
  return os.str();
}

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, Plan> plans;
};

Cache& cache() {
  static auto* c = new Cache();  // never destroyed: handlers may run during interpreter exit
  return *c;
}

}  // namespace

Result<Plan> cached_plan(const RaggedDotSpec& spec, const PlanTarget& target) {
  const std::string key = signature_key(spec, target);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (auto it = c.plans.find(key); it != c.plans.end()) return it->second;
  }
  // Planned outside the lock: a kernel compile must not stall other signatures. Two threads that
  // race on one signature both plan; the first stored wins.
  RAGDOT_ASSIGN_OR_RETURN(RaggedDot op, RaggedDot::create(spec));
  PlanOptions options;
  options.backend = target.backend;
  options.memory_space = target.memory_space;
  options.device = target.device;
  options.lhs_gather_rows = target.lhs_gather_rows;
  RAGDOT_ASSIGN_OR_RETURN(Plan plan, make_plan(op, options));
  std::lock_guard<std::mutex> lock(c.mu);
  return c.plans.emplace(key, std::move(plan)).first->second;
}

std::size_t plan_cache_size() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().plans.size();
}

void clear_plan_cache() {
  std::lock_guard<std::mutex> lock(cache().mu);
  cache().plans.clear();
}

}  // namespace ragdot::python
