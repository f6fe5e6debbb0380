// Compile progress: the progress line, the summary line and the terminal reporter.
#include "codegen/compile_progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kiln::codegen {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string Modules(int n) { return absl::StrCat(n, " kernel module", n == 1 ? "" : "s"); }

}  // namespace

std::string ProgressLine(int done, int total, double seconds, int width) {
  const int filled = total > 0 ? static_cast<int>(static_cast<int64_t>(width) * std::clamp(done, 0, total) / total) : 0;
  return absl::StrFormat("kiln: compiling %s [%s%s] %d/%d  %.1f s", Modules(total), std::string(filled, '#'),
                         std::string(width - filled, '.'), done, total, seconds);
}

std::string SummaryLine(const ModuleCompileStats& stats) {
  if (stats.modules == 0) return "";
  std::string line = absl::StrCat("kiln: ", Modules(stats.modules), ": ", stats.compiled, " compiled by NVRTC");
  if (stats.cache_enabled) {
    absl::StrAppend(&line, ", ", stats.cache_hits, " from the kernel cache");
    if (stats.cache_corrupt > 0) absl::StrAppend(&line, " (", stats.cache_corrupt, " corrupt entries replaced)");
  } else {
    absl::StrAppend(&line, ", kernel cache off");
  }
  absl::StrAppendFormat(&line, " (%.1f s)", stats.seconds);
  return line;
}

TerminalProgress::TerminalProgress(std::FILE* out, bool is_tty) : out_(out), is_tty_(is_tty) {}

TerminalProgress::~TerminalProgress() { StopTicker(); }

std::unique_ptr<TerminalProgress> TerminalProgress::ForStderr() {
  return std::make_unique<TerminalProgress>(stderr, isatty(STDERR_FILENO) != 0);
}

void TerminalProgress::Draw() {
  // '\r' back to the line's start, ESC[K erases what a longer previous line left.
  std::fprintf(out_, "\r%s\x1b[K", ProgressLine(done_, total_, Now() - start_).c_str());
  std::fflush(out_);
}

void TerminalProgress::Begin(int to_compile, int cached) {
  StopTicker();
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = 0;
  total_ = to_compile;
  start_ = Now();
  if (!is_tty_ || to_compile == 0) return;
  Draw();
  running_ = true;
  ticker_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (running_) {
      if (wake_.wait_for(lock, std::chrono::milliseconds(100), [this] { return !running_; })) break;
      Draw();
    }
  });
}

void TerminalProgress::Advance(int done, int to_compile) {
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = done;
  total_ = to_compile;
  if (is_tty_ && running_) Draw();
}

void TerminalProgress::StopTicker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void TerminalProgress::End(const ModuleCompileStats& stats, bool ok) {
  const bool drew = ticker_.joinable();
  StopTicker();
  std::lock_guard<std::mutex> lock(mutex_);
  if (drew) std::fputs("\r\x1b[K", out_);  // the bar gives way to the summary (or the error that follows)
  const std::string summary = ok ? SummaryLine(stats) : "";
  if (!summary.empty()) std::fprintf(out_, "%s\n", summary.c_str());
  for (const std::string& w : stats.warnings) std::fprintf(out_, "kiln: warning: %s\n", w.c_str());
  std::fflush(out_);
}

}  // namespace kiln::codegen
