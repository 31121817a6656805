// Checks a backend's output of an MoE GEMM against the oracle on a sample: a few rows of the
// first, the largest and the last non-empty group, against evenly spaced output columns. The
// oracle (cpu_ref, float64 accumulation) computes exactly those entries from the same inputs,
// as a smaller ragged dot of the sampled rows and columns.
#pragma once

#include <string>
#include <vector>

#include "moe_case.hpp"
#include "operand_set.hpp"

namespace ragdot::cli {

struct SampleCheck {
  bool passed = false;
  double rel_error = 0.0;
  double tolerance = 0.0;
  std::int64_t rows = 0, cols = 0, groups = 0;
  std::string message;  // why it failed; empty when it passed
  std::string summary() const;
};

SampleCheck check_sample(const MoeGemmCase& gemm, const OperandSet& operands, const std::vector<unsigned char>& out,
                         DType out_dtype);

}  // namespace ragdot::cli
