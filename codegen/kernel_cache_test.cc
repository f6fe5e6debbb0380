// Tests for the on-disk kernel cache (no GPU, no NVRTC: entries are plain bytes).
#include "codegen/kernel_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace kiln::codegen {
namespace {

namespace fs = std::filesystem;

std::string TestDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("kiln_kernel_cache_" + name);
  fs::remove_all(dir);
  return dir.string();
}

KernelCacheKey Key(const std::string& source = "module text", const std::string& arch = "sm_90a") {
  return KernelCacheKey{Sha256Hex(source), arch, "13.0", {"--gpu-architecture=" + arch, "--std=c++17"}};
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(KernelCacheTest, Sha256MatchesKnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // 1,000,000 x 'a' crosses many blocks and the 55/56-byte padding boundary.
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(Sha256Hex(std::string(55, 'x')).size(), 64u);
  EXPECT_NE(Sha256Hex(std::string(55, 'x')), Sha256Hex(std::string(56, 'x')));
}

TEST(KernelCacheTest, KeyCoversSourceArchVersionAndOptions) {
  const std::string base = Key().Digest();
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(Key().Digest(), base);  // stable
  EXPECT_NE(Key("other module text").Digest(), base);
  KernelCacheKey arch = Key();
  arch.arch = "sm_80";
  EXPECT_NE(arch.Digest(), base);
  KernelCacheKey version = Key();
  version.nvrtc_version = "13.1";
  EXPECT_NE(version.Digest(), base);
  KernelCacheKey options = Key();
  options.options.push_back("-lineinfo");
  EXPECT_NE(options.Digest(), base);
  // Fields are length-prefixed: moving text between options changes the key.
  KernelCacheKey split = Key();
  split.options = {"--gpu-architecture=sm_90a--std=c++17"};
  EXPECT_NE(split.Digest(), base);
}

TEST(KernelCacheTest, MissThenHit) {
  KernelCache cache(TestDir("hit"));
  std::string cubin;
  EXPECT_EQ(cache.Load(Key(), &cubin), KernelCache::Lookup::kMiss);
  const std::string bytes(
      "\x7f"
      "ELF\0\1\2 binary\n\n payload",
      24);
  ASSERT_TRUE(cache.Store(Key(), bytes).ok());
  ASSERT_EQ(cache.Load(Key(), &cubin), KernelCache::Lookup::kHit);
  EXPECT_EQ(cubin, bytes);
  // Another arch is another entry.
  EXPECT_EQ(cache.Load(Key("module text", "sm_80"), &cubin), KernelCache::Lookup::kMiss);
  // No temporary files left behind.
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(cache.dir())) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1);
  EXPECT_EQ(fs::path(cache.EntryPath(Key())).filename().string(), Key().Digest() + ".cubin");
}

TEST(KernelCacheTest, CorruptOrTruncatedEntriesAreNeverUsed) {
  KernelCache cache(TestDir("corrupt"));
  const std::string bytes(5000, 'c');
  ASSERT_TRUE(cache.Store(Key(), bytes).ok());
  const std::string path = cache.EntryPath(Key());
  const std::string good = Slurp(path);
  auto write = [&](const std::string& data) { std::ofstream(path, std::ios::binary | std::ios::trunc) << data; };
  std::string cubin;

  write(good.substr(0, good.size() - 1));  // truncated payload
  EXPECT_EQ(cache.Load(Key(), &cubin), KernelCache::Lookup::kCorrupt);
  write(good.substr(0, 20));  // truncated header
  EXPECT_EQ(cache.Load(Key(), &cubin), KernelCache::Lookup::kCorrupt);
  std::string flipped = good;
  flipped[flipped.size() - 100] = 'd';  // same size, one byte changed
  write(flipped);
  EXPECT_EQ(cache.Load(Key(), &cubin), KernelCache::Lookup::kCorrupt);
  write(good + "x");  // trailing garbage
  EXPECT_EQ(cache.Load(Key(), &cubin), KernelCache::Lookup::kCorrupt);
  write("");
  EXPECT_EQ(cache.Load(Key(), &cubin), KernelCache::Lookup::kCorrupt);
  // A valid entry of another key copied under this key's name.
  ASSERT_TRUE(cache.Store(Key("another module"), bytes).ok());
  write(Slurp(cache.EntryPath(Key("another module"))));
  EXPECT_EQ(cache.Load(Key(), &cubin), KernelCache::Lookup::kCorrupt);
  EXPECT_TRUE(cubin.empty());

  // Storing again replaces the bad entry.
  ASSERT_TRUE(cache.Store(Key(), bytes).ok());
  ASSERT_EQ(cache.Load(Key(), &cubin), KernelCache::Lookup::kHit);
  EXPECT_EQ(cubin, bytes);
}

TEST(KernelCacheTest, UnwritableDirectoryIsAnErrorToReportNotACrash) {
  // A regular file where the directory should be: fails even for root.
  const std::string dir = TestDir("unwritable");
  fs::create_directories(dir);
  std::ofstream(dir + "/file") << "x";
  KernelCache cache(dir + "/file/cache");
  absl::Status st = cache.Store(Key(), "bytes");
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(st.message().find(dir + "/file/cache"), absl::string_view::npos) << st;
  std::string cubin;
  EXPECT_EQ(cache.Load(Key(), &cubin), KernelCache::Lookup::kMiss);
}

TEST(KernelCacheTest, DefaultDirectoryFollowsTheEnvironment) {
  const char* saved[3] = {std::getenv("KILN_CACHE_DIR"), std::getenv("XDG_CACHE_HOME"), std::getenv("HOME")};
  const std::string saved_values[3] = {saved[0] ? saved[0] : "", saved[1] ? saved[1] : "", saved[2] ? saved[2] : ""};
  setenv("KILN_CACHE_DIR", "/k", 1);
  setenv("XDG_CACHE_HOME", "/x", 1);
  setenv("HOME", "/h", 1);
  EXPECT_EQ(DefaultKernelCacheDir(), "/k");
  unsetenv("KILN_CACHE_DIR");
  EXPECT_EQ(DefaultKernelCacheDir(), "/x/kiln");
  setenv("XDG_CACHE_HOME", "", 1);
  EXPECT_EQ(DefaultKernelCacheDir(), "/h/.cache/kiln");
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  EXPECT_EQ(DefaultKernelCacheDir(), "");
  const char* names[3] = {"KILN_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  for (int i = 0; i < 3; ++i) {
    if (saved[i] != nullptr) setenv(names[i], saved_values[i].c_str(), 1);
  }
}

}  // namespace
}  // namespace kiln::codegen
