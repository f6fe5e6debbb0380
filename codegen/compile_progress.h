// Progress of the NVRTC compile of a bundle's kernel modules: a small interface that
// codegen::CompileModules reports to (library users get no output unless they pass
// one), and the terminal reporter the `kiln` tool uses: an updating progress bar when
// its stream is a terminal, nothing but one summary line when it is not (CI logs).
#pragma once

#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln::codegen {

// What one CompileModules call did.
struct ModuleCompileStats {
  int modules = 0;        // modules returned (the bundle's cubins)
  int compiled = 0;       // compiled by NVRTC in this call
  int cache_hits = 0;     // loaded from the kernel cache
  int cache_corrupt = 0;  // cache entries that failed their checks (then recompiled)
  bool cache_enabled = false;
  double seconds = 0;  // wall time: cache lookups, compiles, cache writes
  // Things a user should hear about that do not stop the compile (a cache directory
  // that cannot be written, ...), one sentence each.
  std::vector<std::string> warnings;
};

// Receives the progress of one CompileModules call. Calls never overlap (the caller
// serialises them) but may come from different threads.
class CompileProgress {
 public:
  virtual ~CompileProgress() = default;
  // Before compiling: `to_compile` modules go to NVRTC, `cached` came from the cache.
  virtual void Begin(int to_compile, int cached) {}
  // After each module NVRTC finished: `done` of `to_compile`.
  virtual void Advance(int done, int to_compile) {}
  // Once at the end, also after a failure (`ok` false).
  virtual void End(const ModuleCompileStats& stats, bool ok) {}
};

// "kiln: compiling 12 kernel modules [#######.....] 7/12  3.2 s" (bar of `width`).
std::string ProgressLine(int done, int total, double seconds, int width = 12);

// "kiln: 12 kernel modules: 7 compiled by NVRTC, 5 from the kernel cache (3.2 s)";
// "" when there were no modules.
std::string SummaryLine(const ModuleCompileStats& stats);

// Writes progress to `out` (stderr for the kiln tool). On a terminal (`is_tty`) one
// line redrawn in place ('\r') on every module and every 100 ms, replaced at the end
// by the summary line; otherwise only the summary line. Warnings follow, one line
// each ("kiln: warning: ...").
class TerminalProgress : public CompileProgress {
 public:
  TerminalProgress(std::FILE* out, bool is_tty);
  ~TerminalProgress() override;
  // For stderr, a bar only when stderr is a terminal.
  static std::unique_ptr<TerminalProgress> ForStderr();

  void Begin(int to_compile, int cached) override;
  void Advance(int done, int to_compile) override;
  void End(const ModuleCompileStats& stats, bool ok) override;

 private:
  void Draw();  // with mutex_ held
  void StopTicker();

  std::FILE* out_;
  bool is_tty_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread ticker_;
  bool running_ = false;
  int done_ = 0;
  int total_ = 0;
  double start_ = 0;  // steady-clock seconds
};

}  // namespace kiln::codegen
