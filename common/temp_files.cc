// Temporary files removed on SIGINT/SIGTERM/SIGHUP (common/temp_files.h). The
// handler only reads fixed buffers and calls unlink, signal, raise: async-signal-safe.
#include "common/temp_files.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace kiln {
namespace {

constexpr size_t kMaxPath = 4096;
char g_paths[kMaxTempFiles][kMaxPath];
std::atomic<bool> g_used[kMaxTempFiles];
std::mutex g_mu;  // registration only, never in the handler

void OnSignal(int sig) {
  for (int i = 0; i < kMaxTempFiles; ++i) {
    if (g_used[i].load()) ::unlink(g_paths[i]);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void InstallOnce() {
  static const bool installed = [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old;
      if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;  // e.g. nohup
      struct sigaction sa;
      std::memset(&sa, 0, sizeof(sa));
      sa.sa_handler = OnSignal;
      sigemptyset(&sa.sa_mask);
      ::sigaction(sig, &sa, nullptr);
    }
    return true;
  }();
  (void)installed;
}

}  // namespace

int RegisterTempFile(const std::string& path) {
  if (path.size() + 1 > kMaxPath) return -1;
  InstallOnce();
  std::lock_guard<std::mutex> lock(g_mu);
  for (int i = 0; i < kMaxTempFiles; ++i) {
    if (g_used[i].load()) continue;
    std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
    g_used[i].store(true);
    return i;
  }
  return -1;
}

void UnregisterTempFile(int slot) {
  if (slot < 0 || slot >= kMaxTempFiles) return;
  std::lock_guard<std::mutex> lock(g_mu);
  g_used[slot].store(false);
}

}  // namespace kiln
