// ragged_dot_general on arrays handed over by Python: NumPy arrays (host, buffer protocol) or
// DLPack arrays (host or CUDA: PyTorch, CuPy, JAX). The output is allocated by the caller.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>
#include <string>

#include "spec_args.hpp"

namespace ragdot::python {

using InArray = nanobind::ndarray<nanobind::ro, nanobind::c_contig>;
using OutArray = nanobind::ndarray<nanobind::c_contig>;

struct ArrayCall {
  InArray lhs, rhs, group_sizes;
  std::optional<InArray> group_offset;
  OutArray out;
  std::optional<OutArray> workspace;  // device plans that need one (see workspace_bytes)
  // int32 [m]: row i of the op's lhs is row lhs_rows[i] of `lhs`, a table of rows [r, k]
  // (PlanOptions::lhs_gather_rows); the spec describes the gathered lhs [m, k].
  std::optional<InArray> lhs_rows;
};

// Plans (cached) on `backend` (empty: automatic for the arrays' memory space) and executes on
// `stream` (a cudaStream_t as an integer; 0 is the legacy default stream) for CUDA arrays.
void execute_arrays(const SpecArgs& spec, const ArrayCall& call, const std::string& backend, std::uintptr_t stream);

// Bytes of device workspace the plan for these arrays needs (a relayout copy of an operand, or a
// checked plan's verdict), which the caller allocates in its framework and passes to
// execute_arrays; 0 for host arrays, whose workspace the module keeps itself. lhs_gather_rows:
// the rows of the lhs table when the call gathers (ArrayCall::lhs_rows).
std::size_t workspace_bytes(const SpecArgs& spec, const OutArray& out, const std::string& backend,
                            std::optional<std::int64_t> lhs_gather_rows = std::nullopt);

}  // namespace ragdot::python
