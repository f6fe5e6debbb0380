// Tests for the compile progress lines and the terminal reporter.
#include "codegen/compile_progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace kiln::codegen {
namespace {

// Runs `body` with a reporter writing to a temporary file; returns what it wrote.
template <typename Body>
std::string Capture(bool is_tty, Body body) {
  std::FILE* f = std::tmpfile();
  {
    TerminalProgress progress(f, is_tty);
    body(progress);
  }
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

ModuleCompileStats Stats(int compiled, int hits) {
  ModuleCompileStats s;
  s.modules = compiled + hits;
  s.compiled = compiled;
  s.cache_hits = hits;
  s.cache_enabled = true;
  s.seconds = 3.25;
  return s;
}

TEST(CompileProgressTest, ProgressLine) {
  EXPECT_EQ(ProgressLine(7, 12, 3.24), "kiln: compiling 12 kernel modules [#######.....] 7/12  3.2 s");
  EXPECT_EQ(ProgressLine(0, 1, 0), "kiln: compiling 1 kernel module [............] 0/1  0.0 s");
  EXPECT_EQ(ProgressLine(3, 3, 10, 4), "kiln: compiling 3 kernel modules [####] 3/3  10.0 s");
}

TEST(CompileProgressTest, SummaryLine) {
  EXPECT_EQ(SummaryLine(Stats(7, 5)), "kiln: 12 kernel modules: 7 compiled by NVRTC, 5 from the kernel cache (3.2 s)");
  ModuleCompileStats off = Stats(1, 0);
  off.cache_enabled = false;
  EXPECT_EQ(SummaryLine(off), "kiln: 1 kernel module: 1 compiled by NVRTC, kernel cache off (3.2 s)");
  ModuleCompileStats corrupt = Stats(2, 0);
  corrupt.cache_corrupt = 1;
  EXPECT_NE(SummaryLine(corrupt).find("1 corrupt entries replaced"), std::string::npos);
  EXPECT_EQ(SummaryLine(ModuleCompileStats{}), "");
}

TEST(CompileProgressTest, NotATerminalGetsOnlyTheSummaryAndWarnings) {
  ModuleCompileStats stats = Stats(3, 1);
  stats.warnings = {"kernel cache: cannot write /x"};
  const std::string out = Capture(false, [&](TerminalProgress& p) {
    p.Begin(3, 1);
    for (int i = 1; i <= 3; ++i) p.Advance(i, 3);
    p.End(stats, true);
  });
  EXPECT_EQ(out, SummaryLine(stats) + "\nkiln: warning: kernel cache: cannot write /x\n");
}

TEST(CompileProgressTest, TerminalGetsABarRedrawnInPlace) {
  const std::string out = Capture(true, [&](TerminalProgress& p) {
    p.Begin(2, 0);
    p.Advance(1, 2);
    p.Advance(2, 2);
    p.End(Stats(2, 0), true);
  });
  EXPECT_EQ(out.rfind("\rkiln: compiling 2 kernel modules [............] 0/2", 0), 0u) << out;
  EXPECT_NE(out.find("[######......] 1/2"), std::string::npos) << out;
  EXPECT_NE(out.find("[############] 2/2"), std::string::npos) << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1) << "one line, redrawn with \\r";
  EXPECT_NE(out.find("\r\x1b[K" + SummaryLine(Stats(2, 0)) + "\n"), std::string::npos) << out;
}

TEST(CompileProgressTest, FailureEndsWithoutSummary) {
  const std::string out = Capture(false, [&](TerminalProgress& p) {
    p.Begin(1, 0);
    p.End(Stats(0, 0), false);
  });
  EXPECT_EQ(out, "");
}

}  // namespace
}  // namespace kiln::codegen
