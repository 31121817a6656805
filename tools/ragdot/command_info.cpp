// ragdot info: what this build is, what it runs on, and which backends are present (and, for those
// that are not, why: no GPU, no driver, no NVRTC, a build without the GPU backends).
#include <cstdio>
#include <cstdlib>

#include "backends/cpu/cpu_features.hpp"
#include "command_help.hpp"
#include "commands.hpp"
#include "core/env.hpp"
#include "gemm_metrics.hpp"
#include "machine_info.hpp"
#include "ragdot/ep_transport.hpp"
#include "ragdot/plan.hpp"
#include "ragdot/version.hpp"
#include "ragdot/workloads.hpp"
#include "text_table.hpp"
#include "usage_error.hpp"
#include "verify/check.hpp"

#ifndef RAGDOT_CLI_BUILD_TYPE
#define RAGDOT_CLI_BUILD_TYPE "unknown"
#endif
#ifndef RAGDOT_CLI_WITH_CUDA
#define RAGDOT_CLI_WITH_CUDA 0
#endif

namespace ragdot::cli {

namespace {

// Every variable of docs/ENVIRONMENT.md, shown when set.
constexpr const char* kEnvironment[] = {
    "RAGDOT_BACKEND",   "RAGDOT_NUM_THREADS", "RAGDOT_CPU_ISA",      "RAGDOT_PRINT_PLAN",
    "RAGDOT_DEBUG",     "RAGDOT_CHECKED",     "RAGDOT_CACHE_DIR",    "RAGDOT_DUMP_SOURCE",
    "RAGDOT_DUMP_SASS", "RAGDOT_CUDA_ARCH",   "RAGDOT_NVRTC_LIBRARY", "RAGDOT_CUBLAS_LIBRARY",
    "RAGDOT_NCCL_LIBRARY", "RAGDOT_EP_RANK",  "RAGDOT_EP_WORLD_SIZE", "RAGDOT_EP_DEVICE",
    "RAGDOT_EP_ID",     "RAGDOT_EP_ID_FILE",  "RAGDOT_EP_TIMEOUT",   "RAGDOT_PLAN_EFFORT",
    "RAGDOT_CUDA_VARIANT", "RAGDOT_MOE_SORT", "RAGDOT_MOE_ROWS",
};

CommandHelp info_help() {
  CommandHelp h;
  h.name = "info";
  h.description =
      "Prints the version and build, the machine (CPU model, threads, free memory, the instruction\n"
      "sets the cpu backend uses), the backends of this build in the order automatic selection tries\n"
      "them with what each runs on or why it is missing here, the ragdot environment variables that are\n"
      "set, and the model presets.\n";
  return h;
}

const char* yes_no(bool b) { return b ? "yes" : "no"; }

}  // namespace

int command_info(const std::vector<std::string>& args) {
  const CommandHelp help = info_help();
  const ParsedOptions o = parse_options("info", help.options, args);
  if (o.help_requested()) {
    std::fputs(render_help(help).c_str(), stdout);
    return kExitOk;
  }

  std::printf("ragdot %s (%s build, GPU backends %s, %s)\n", version_string(), RAGDOT_CLI_BUILD_TYPE,
              RAGDOT_CLI_WITH_CUDA ? "built" : "not built", "g++ " __VERSION__);
  std::printf("\nmachine\n");
  std::printf("  host      %s\n", host_name().c_str());
  std::printf("  cpu       %s, %d hardware threads\n", cpu_model().c_str(), hardware_threads());
  const double memory = available_host_memory_bytes();
  std::printf("  memory    %s available\n", memory > 0 ? format_bytes(memory).c_str() : "unknown");
  const auto& f = cpu::cpu_features();
  std::printf("  features  avx512 %s, avx512_bf16 %s, amx_bf16 %s\n", yes_no(f.avx512), yes_no(f.avx512_bf16),
              yes_no(f.amx_bf16));
  std::printf("  cpu isa   %s%s\n", cpu::isa_name(cpu::best_isa()),
              env::cpu_isa() ? (" (capped by RAGDOT_CPU_ISA=" + *env::cpu_isa() + ")").c_str() : "");
  std::printf("  threads   %d used by the cpu backends\n", env::num_threads());
  std::string gpu_why;
  const bool gpu = verify::memory_for(MemorySpace::kDevice, &gpu_why) != nullptr;
  std::printf("  gpu       %s\n", gpu ? "present" : ("none: " + gpu_why).c_str());
  const auto nccl = ep::nccl_version();
  std::printf("  nccl      %s\n", nccl.ok() ? (*nccl + " (expert parallelism over GPUs)").c_str()
                                           : ("none: " + nccl.status().message()).c_str());

  std::printf("\nbackends (automatic selection tries them in this order)\n");
  TextTable t;
  for (const char* h : {"name", "present", "memory", "automatic", "runs on / why not"}) t.add_column(h);
  for (const auto& b : list_backends()) {
    t.add_row({b.name, yes_no(b.available), memory_space_name(b.memory_space), b.automatic ? "yes" : "only when named",
               b.detail});
  }
  std::fputs(t.render("  ").c_str(), stdout);
  std::string chosen = "none";
  for (const auto& b : list_backends()) {
    if (b.available && b.automatic) {
      chosen = b.name;
      break;
    }
  }
  if (auto forced = env::backend()) chosen = *forced + " (RAGDOT_BACKEND)";
  std::printf("  automatic choice: %s\n", chosen.c_str());

  std::printf("\nenvironment (docs/ENVIRONMENT.md)\n");
  bool any = false;
  for (const char* name : kEnvironment) {
    if (const char* v = std::getenv(name); v != nullptr) {
      std::printf("  %s=%s\n", name, v);
      any = true;
    }
  }
  if (!any) std::printf("  no RAGDOT_* variable is set\n");
  std::printf("  JIT cache directory: %s\n", env::cache_dir().c_str());

  std::printf("\nmodel presets (ragdot run --model)\n");
  TextTable p;
  p.add_column("preset");
  for (const char* h : {"hidden", "expert ffn", "experts", "top-k", "shared"}) p.add_column(h, TextTable::Align::kRight);
  for (const auto& m : workloads::presets()) {
    p.add_row({m.name, std::to_string(m.hidden), std::to_string(m.expert_ffn), std::to_string(m.experts),
               std::to_string(m.top_k), std::to_string(m.shared_experts)});
  }
  std::fputs(p.render("  ").c_str(), stdout);
  return kExitOk;
}

}  // namespace ragdot::cli
