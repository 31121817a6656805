#include "backends/cublas/cublas_library.hpp"

#include <dlfcn.h>

#include "backends/cuda/shared_library.hpp"
#include "core/env.hpp"

namespace ragdot::cublas {

namespace {

#define RAGDOT_CUBLAS_STRINGIFY_(x) #x
#define RAGDOT_CUBLAS_STRINGIFY(x) RAGDOT_CUBLAS_STRINGIFY_(x)

struct Loaded {
  CublasApi api;
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded l;
  // RAGDOT_CUBLAS_LIBRARY names the library; otherwise the CUDA 13 soname, then the plain one.
  std::vector<std::string> candidates;
  if (auto path = env::cublas_library()) candidates.push_back(*path);
  else candidates = {"libcublas.so.13", "libcublas.so"};
  std::string failures;
  void* lib = cuda::open_first_library(candidates, failures);
  if (!lib) {
    l.why = "cuBLAS not loadable (" + failures + ")";
    return l;
  }
#define RAGDOT_CUBLAS_FN(name) \
  l.api.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, RAGDOT_CUBLAS_STRINGIFY(name)));
#include "backends/cublas/cublas_functions.inc"
#undef RAGDOT_CUBLAS_FN
  if (!l.api.cublasGetProperty || !l.api.cublasCreate || !l.api.cublasDestroy || !l.api.cublasSetStream ||
      !l.api.cublasGemmStridedBatchedEx_64 || !l.api.cublasGemmEx_64) {
    l.why = "the cuBLAS library loaded lacks entry points ragdot needs (cuBLAS 12 or newer)";
    return l;
  }
  int major = 0, minor = 0, patch = 0;
  l.api.cublasGetProperty(MAJOR_VERSION, &major);
  l.api.cublasGetProperty(MINOR_VERSION, &minor);
  l.api.cublasGetProperty(PATCH_LEVEL, &patch);
  l.api.version = major * 10000 + minor * 100 + patch;
  l.ok = true;
  return l;
}

}  // namespace

const CublasApi* library(std::string* why) {
  static const Loaded loaded = load();
  if (!loaded.ok) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

Status cublas_status(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::ok();
  const char* msg = nullptr;
  if (const CublasApi* b = library(); b && b->cublasGetStatusString) msg = b->cublasGetStatusString(s);
  const std::string text = std::string(what) + ": cuBLAS status " + std::to_string(int(s)) + " (" + (msg ? msg : "?") + ")";
  if (s == CUBLAS_STATUS_NOT_SUPPORTED) return unsupported(text);
  if (s == CUBLAS_STATUS_ALLOC_FAILED) return resource_exhausted(text);
  return internal_error(text);
}

std::string version_string(int version) {
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

namespace {

bool data_type_for(DType dtype, cudaDataType_t& out) {
  switch (dtype) {
    case DType::kF32: out = CUDA_R_32F; return true;
    case DType::kBF16: out = CUDA_R_16BF; return true;
    case DType::kF16: out = CUDA_R_16F; return true;
    default: return false;
  }
}

}  // namespace

Status gemm_data_types(const core::GroupGemmProblem& p, cudaDataType_t& in, cudaDataType_t& out) {
  const bool same_out = p.out_dtype == p.lhs_dtype;
  const bool widened = p.out_dtype == DType::kF32 && p.lhs_dtype != DType::kF32;
  if (p.lhs_dtype != p.rhs_dtype || !data_type_for(p.lhs_dtype, in) || !data_type_for(p.out_dtype, out) ||
      !(same_out || widened)) {
    return unsupported(std::string("cuBLAS GEMMs here take f32, bf16 or f16 inputs of one dtype with an output of "
                                   "that dtype or f32, not ") +
                       std::string(dtype_name(p.lhs_dtype)) + "*" + std::string(dtype_name(p.rhs_dtype)) + "->" +
                       std::string(dtype_name(p.out_dtype)));
  }
  return Status::ok();
}

}  // namespace ragdot::cublas
