// ragged_dot_general on arrays handed over by Python: NumPy arrays (host, buffer protocol) or
// DLPack arrays (host or CUDA: PyTorch, CuPy, JAX). The output is allocated by the caller.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

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
};

// Plans (cached) on `backend` (empty: automatic for the arrays' memory space) and executes on
// `stream` (a cudaStream_t as an integer; 0 is the legacy default stream) for CUDA arrays.
void execute_arrays(const SpecArgs& spec, const ArrayCall& call, const std::string& backend, std::uintptr_t stream);

// Bytes of device workspace the plan for these arrays needs (a relayout copy of an operand, or a
// checked plan's verdict), which the caller allocates in its framework and passes to
// execute_arrays; 0 for host arrays, whose workspace the module keeps itself.
std::size_t workspace_bytes(const SpecArgs& spec, const OutArray& out, const std::string& backend);

}  // namespace ragdot::python
