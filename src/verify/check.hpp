// Runs one case on a backend and compares it with the oracle: fresh random inputs, the output
// poisoned with NaN first, float64 reference, relative Frobenius error against a per-dtype bound,
// and exact zeros wherever the reference is exactly zero (rows no group covers, empty groups).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ragdot/plan.hpp"
#include "verify/cases.hpp"

namespace ragdot::verify {

// Moves buffers to where a backend runs. The host version is the identity.
class MemoryOps {
 public:
  virtual ~MemoryOps() = default;
  virtual MemorySpace space() const = 0;
  virtual Result<void*> alloc(std::size_t bytes) = 0;
  virtual void free(void* p) = 0;
  virtual Status upload(void* dst, const void* src, std::size_t bytes) = 0;
  virtual Status download(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void* stream() { return nullptr; }
  virtual Status synchronize() { return Status::ok(); }
};

MemoryOps& host_memory();
// The memory a backend of `space` needs: host memory, or the first GPU through the CUDA driver
// (loaded at run time). Null when there is no such memory here (no driver, no GPU); `why` says why.
MemoryOps* memory_for(MemorySpace space, std::string* why = nullptr);

struct CheckResult {
  bool passed = false;
  double rel_error = 0.0;
  double tolerance = 0.0;
  std::string plan;     // the plan's one line
  std::string message;  // why it failed (or the error the backend returned)
};

// Bound on ||out - ref|| / ||ref|| for an output dtype and contraction length.
double tolerance_for(DType out, std::int64_t k);
// The largest error rounding to the output dtype makes below its smallest normal number: half the
// spacing of its subnormals (f16: 2^-25). There relative error grows without bound (a correctly
// rounded f16 of 2e-6 is off by up to 1.4%), so a relative bound alone does not hold; a check of
// arbitrary magnitudes first forgives each element this much.
double subnormal_rounding_for(DType out);

// Fills a host buffer with values drawn uniformly from [-1, 1), exactly representable in dtype.
void fill_random(void* data, DType dtype, std::int64_t count, std::uint64_t seed);
// Writes NaN into every element.
void poison(void* data, DType dtype, std::int64_t count);

// The case's group sizes as the bytes of its group_sizes tensor (int32 or int64).
std::vector<unsigned char> encode_group_sizes(const Case& c);

// With repeats > 1 the plan runs that many times on the same inputs, the output poisoned before
// each run, and every run must give the first run's bytes exactly (determinism).
CheckResult check_case(const Case& c, const PlanOptions& options, std::uint64_t seed, MemoryOps& mem = host_memory(),
                       int repeats = 1);

}  // namespace ragdot::verify
