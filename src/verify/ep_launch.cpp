#include "verify/ep_launch.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

extern char** environ;

namespace ragdot::verify {

namespace {

// This process's environment with `set` put over it (a later entry of `set` over an earlier one),
// as the strings execve takes.
std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& set) {
  auto in_set = [&](const std::string& name, std::size_t from) {
    return std::any_of(set.begin() + std::ptrdiff_t(from), set.end(), [&](const auto& kv) { return kv.first == name; });
  };
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    if (!in_set(entry.substr(0, entry.find('=')), 0)) out.push_back(entry);
  }
  for (std::size_t i = 0; i < set.size(); ++i) {
    if (!in_set(set[i].first, i + 1)) out.push_back(set[i].first + "=" + set[i].second);
  }
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (auto& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

}  // namespace

Result<std::vector<int>> run_ranks(const RankLaunch& launch) {
  if (launch.world_size < 1 || launch.argv.empty()) return invalid_argument("run_ranks: no ranks or no program");
  if (!launch.id_file.empty()) std::remove(launch.id_file.c_str());  // a stale id would hang the ranks
  // Everything a child needs is made here: between fork and exec it only calls execve, as a
  // process with other threads (a CUDA driver's) must.
  std::vector<std::string> argv = launch.argv;
  std::vector<char*> argp = pointers(argv);
  std::vector<std::vector<std::string>> envs;
  std::vector<std::vector<char*>> envp;
  for (int r = 0; r < launch.world_size; ++r) {
    std::vector<std::pair<std::string, std::string>> set = {
        {"RAGDOT_EP_RANK", std::to_string(r)},
        {"RAGDOT_EP_WORLD_SIZE", std::to_string(launch.world_size)},
        {"NCCL_NVLS_ENABLE", "0"}};  // NVLink multicast off in every rank
    if (launch.gpus > 0) set.emplace_back("RAGDOT_EP_DEVICE", std::to_string(r % launch.gpus));
    if (!launch.id_file.empty()) set.emplace_back("RAGDOT_EP_ID_FILE", launch.id_file);
    set.insert(set.end(), launch.env.begin(), launch.env.end());
    envs.push_back(environment_with(set));
  }
  for (auto& e : envs) envp.push_back(pointers(e));
  std::vector<pid_t> pids;
  std::vector<int> status(std::size_t(launch.world_size), -1);
  for (int r = 0; r < launch.world_size; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      return unavailable("run_ranks: fork failed");
    }
    if (pid == 0) {  // the child: never returns here
      ::execve(argp[0], argp.data(), envp[std::size_t(r)].data());
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
