#include "backends/cuda/nvrtc_compiler.hpp"

#include <dlfcn.h>
#include <nvrtc.h>

#include <chrono>
#include <filesystem>

#include "backends/cuda/shared_library.hpp"
#include "core/env.hpp"

namespace ragdot::cuda {

namespace {

struct NvrtcApi {
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcGetErrorString) error_string = nullptr;
  decltype(&::nvrtcCreateProgram) create = nullptr;
  decltype(&::nvrtcDestroyProgram) destroy = nullptr;
  decltype(&::nvrtcCompileProgram) compile = nullptr;
  decltype(&::nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&::nvrtcGetProgramLog) log = nullptr;
  decltype(&::nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&::nvrtcGetCUBIN) cubin = nullptr;
  bool ok = false;
  std::string why;
  int major = 0, minor = 0;
  std::string file;  // the library file nvrtcVersion was found in, with its size
};

// The real file (symbolic links resolved) that holds `symbol`, and its size: "libnvrtc.so.13.0.88 94105232".
std::string library_file_of(const void* symbol) {
  Dl_info info{};
  if (!dladdr(symbol, &info) || !info.dli_fname) return "unknown";
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(info.dli_fname, ec);
  if (ec) return info.dli_fname;
  const auto size = std::filesystem::file_size(real, ec);
  return real.filename().string() + " " + (ec ? std::string("?") : std::to_string(size));
}

NvrtcApi load() {
  NvrtcApi a;
  // RAGDOT_NVRTC_LIBRARY names the library explicitly; otherwise the sonames of the CUDA 13 and
  // 12 toolkits, then the toolkit's default install path.
  std::vector<std::string> candidates;
  if (!env::nvrtc_library().empty()) candidates.push_back(env::nvrtc_library());
  for (const char* c : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"})
    candidates.emplace_back(c);
  std::string errors;
  void* lib = open_first_library(candidates, errors);
  if (!lib) {
    a.why = "NVRTC not found (" + errors + "); set RAGDOT_NVRTC_LIBRARY";
    return a;
  }
  a.version = reinterpret_cast<decltype(a.version)>(dlsym(lib, "nvrtcVersion"));
  a.error_string = reinterpret_cast<decltype(a.error_string)>(dlsym(lib, "nvrtcGetErrorString"));
  a.create = reinterpret_cast<decltype(a.create)>(dlsym(lib, "nvrtcCreateProgram"));
  a.destroy = reinterpret_cast<decltype(a.destroy)>(dlsym(lib, "nvrtcDestroyProgram"));
  a.compile = reinterpret_cast<decltype(a.compile)>(dlsym(lib, "nvrtcCompileProgram"));
  a.log_size = reinterpret_cast<decltype(a.log_size)>(dlsym(lib, "nvrtcGetProgramLogSize"));
  a.log = reinterpret_cast<decltype(a.log)>(dlsym(lib, "nvrtcGetProgramLog"));
  a.cubin_size = reinterpret_cast<decltype(a.cubin_size)>(dlsym(lib, "nvrtcGetCUBINSize"));
  a.cubin = reinterpret_cast<decltype(a.cubin)>(dlsym(lib, "nvrtcGetCUBIN"));
  if (!a.version || !a.error_string || !a.create || !a.destroy || !a.compile || !a.log_size || !a.log ||
      !a.cubin_size || !a.cubin) {
    a.why = "NVRTC is too old (no nvrtcGetCUBIN)";
    return a;
  }
  a.version(&a.major, &a.minor);
  a.file = library_file_of(reinterpret_cast<const void*>(a.version));
  a.ok = true;
  return a;
}

const NvrtcApi& api() {
  static const NvrtcApi a = load();
  return a;
}

}  // namespace

std::string nvrtc_version(std::string* why) {
  const NvrtcApi& a = api();
  if (!a.ok) {
    if (why) *why = a.why;
    return {};
  }
  return std::to_string(a.major) + "." + std::to_string(a.minor);
}

std::string nvrtc_build() {
  const NvrtcApi& a = api();
  return a.ok ? nvrtc_version() + " " + a.file : std::string();
}

std::vector<std::string> compile_options(const std::string& arch) {
  return {"--gpu-architecture=" + arch, "--std=c++17", "--use_fast_math", "--ptxas-options=-v",
          "-DRAGDOT_NVRTC=1"};
}

Result<CompileOutput> compile_to_cubin(const std::string& source, const std::string& source_name,
                                       const std::vector<SourceFile>& headers, const std::string& arch) {
  const NvrtcApi& a = api();
  if (!a.ok) return unavailable(a.why);
  std::vector<const char*> header_text, header_names;
  for (const auto& h : headers) {
    header_text.push_back(h.text.c_str());
    header_names.push_back(h.name.c_str());
  }
  const auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram prog = nullptr;
  nvrtcResult r = a.create(&prog, source.c_str(), source_name.c_str(), int(headers.size()), header_text.data(),
                           header_names.data());
  if (r != NVRTC_SUCCESS) return compile_error(std::string("nvrtcCreateProgram: ") + a.error_string(r));
  const std::vector<std::string> options = compile_options(arch);
  std::vector<const char*> opts;
  for (const auto& o : options) opts.push_back(o.c_str());
  r = a.compile(prog, int(opts.size()), opts.data());
  CompileOutput out;
  std::size_t log_size = 0;
  if (a.log_size(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    a.log(prog, out.log.data());
    out.log.resize(log_size - 1);
  }
  if (r != NVRTC_SUCCESS) {
    a.destroy(&prog);
    return compile_error("NVRTC failed to compile " + source_name + " for " + arch + ": " + a.error_string(r) +
                         "\n" + out.log);
  }
  std::size_t size = 0;
  a.cubin_size(prog, &size);
  out.cubin.resize(size);
  a.cubin(prog, out.cubin.data());
  a.destroy(&prog);
  out.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace ragdot::cuda
