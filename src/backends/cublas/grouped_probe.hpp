// Whether cublasGemmGroupedBatchedEx takes a pair of element types on this device. Its documented
// type list is narrower than cublasGemmEx's (16-bit inputs with an f32 output may be missing), so a
// plan asks once with a 16x16x16 problem instead of guessing; the answer is kept per device.
#pragma once

#include <cublas_v2.h>

#include "backends/cublas/cublas_handle.hpp"

namespace ragdot::cublas {

// true: the grouped call ran; false: cuBLAS said not supported / invalid value for these types.
Result<bool> grouped_takes(const cuda::Device& device, const Handle& handle, cudaDataType_t in, cudaDataType_t out);

}  // namespace ragdot::cublas
