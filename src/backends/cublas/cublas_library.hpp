// cuBLAS, loaded at run time with dlopen (libcublas.so.13, else libcublas.so, or
// RAGDOT_CUBLAS_LIBRARY), so that the library loads and its other backends run where cuBLAS is
// not installed. Only the files of this directory see cuBLAS types; public headers never do.
#pragma once

#include <cublas_v2.h>

#include <string>

#include "core/problem.hpp"
#include "ragdot/status.hpp"

namespace ragdot::cublas {

struct CublasApi {
#define RAGDOT_CUBLAS_FN(name) decltype(&::name) name = nullptr;
#include "backends/cublas/cublas_functions.inc"
#undef RAGDOT_CUBLAS_FN
  int version = 0;  // major * 10000 + minor * 100 + patch, as CUBLAS_VERSION
};

// cuBLAS, loaded once; null (with `why`) when it cannot be loaded.
const CublasApi* library(std::string* why = nullptr);

// An error status naming the call and cuBLAS's message, or ok.
Status cublas_status(cublasStatus_t s, const char* what);

// "13.1.0" from a CUBLAS_VERSION-style number.
std::string version_string(int version);

// The cuBLAS element types of a problem's inputs and output: one input dtype of f32, bf16 or f16,
// the output in that dtype or (16-bit inputs) in f32, accumulated in f32 (CUBLAS_COMPUTE_32F).
// unsupported("why") for the other pairs.
Status gemm_data_types(const core::GroupGemmProblem& p, cudaDataType_t& in, cudaDataType_t& out);

#define RAGDOT_CUBLAS_RETURN_IF_ERROR(call, what)                                             \
  do {                                                                                        \
    const cublasStatus_t ragdot_cublas_s_ = (call);                                           \
    if (ragdot_cublas_s_ != CUBLAS_STATUS_SUCCESS) return ::ragdot::cublas::cublas_status(ragdot_cublas_s_, what); \
  } while (0)

}  // namespace ragdot::cublas
