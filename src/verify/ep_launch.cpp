#include "verify/ep_launch.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace ragdot::verify {

Result<std::vector<int>> run_ranks(const RankLaunch& launch) {
  if (launch.world_size < 1 || launch.argv.empty()) return invalid_argument("run_ranks: no ranks or no program");
  if (!launch.id_file.empty()) std::remove(launch.id_file.c_str());  // a stale id would hang the ranks
  std::vector<pid_t> pids;
  std::vector<int> status(std::size_t(launch.world_size), -1);
  for (int r = 0; r < launch.world_size; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      return unavailable("run_ranks: fork failed");
    }
    if (pid == 0) {  // the child: its environment, then the program; never returns here
      ::setenv("RAGDOT_EP_RANK", std::to_string(r).c_str(), 1);
      ::setenv("RAGDOT_EP_WORLD_SIZE", std::to_string(launch.world_size).c_str(), 1);
      if (launch.gpus > 0) ::setenv("RAGDOT_EP_DEVICE", std::to_string(r % launch.gpus).c_str(), 1);
      if (!launch.id_file.empty()) ::setenv("RAGDOT_EP_ID_FILE", launch.id_file.c_str(), 1);
      ::setenv("NCCL_NVLS_ENABLE", "0", 1);  // NVLink multicast off in every rank
      for (const auto& [k, v] : launch.env) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> args;
      for (const auto& a : launch.argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::perror("run_ranks: execv");
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(launch.timeout_s);
  std::size_t left = pids.size();
  while (left > 0) {
    bool reaped = false;
    for (std::size_t r = 0; r < pids.size(); ++r) {
      if (status[r] != -1) continue;
      int ws = 0;
      if (::waitpid(pids[r], &ws, WNOHANG) == pids[r]) {
        status[r] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
        --left;
        reaped = true;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() >= deadline) {
      for (std::size_t r = 0; r < pids.size(); ++r) {
        if (status[r] != -1) continue;
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], nullptr, 0);
        status[r] = 124;
      }
      break;
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status;
}

}  // namespace ragdot::verify
