// The on-disk kernel cache: SHA-256 keys, checked entries, atomic writes.
#include "codegen/kernel_cache.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kiln::codegen {
namespace {

constexpr char kMagic[] = "kiln-kernel-cache 1";
constexpr char kSubdir[] = "kernels-v1";

// SHA-256 (FIPS 180-4), a plain implementation: the cache hashes a few MB per compile.
class Sha256 {
 public:
  void Update(absl::string_view data) {
    for (unsigned char c : data) {
      block_[fill_++] = c;
      if (fill_ == 64) {
        Compress();
        fill_ = 0;
      }
    }
    length_ += data.size();
  }
  std::string HexDigest() {
    const uint64_t bits = length_ * 8;
    const size_t fill = fill_;
    std::string pad(1, '\x80');
    pad.append((fill < 56 ? 55 - fill : 119 - fill), '\0');
    for (int i = 7; i >= 0; --i) pad.push_back(static_cast<char>(bits >> (8 * i)));
    Update(pad);
    static const char kHex[] = "0123456789abcdef";
    std::string out;
    for (uint32_t h : h_) {
      for (int i = 7; i >= 0; --i) out.push_back(kHex[(h >> (4 * i)) & 0xf]);
    }
    return out;
  }

 private:
  static uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void Compress() {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      w[i] = (uint32_t{block_[4 * i]} << 24) | (uint32_t{block_[4 * i + 1]} << 16) |
             (uint32_t{block_[4 * i + 2]} << 8) | uint32_t{block_[4 * i + 3]};
    }
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 = h + (Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const uint32_t t2 = (Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
  }

  std::array<uint32_t, 8> h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<unsigned char, 64> block_{};
  size_t fill_ = 0;
  uint64_t length_ = 0;
};

std::string Header(const KernelCacheKey& key, absl::string_view cubin) {
  return absl::StrCat(kMagic, "\nkey ", key.Digest(), "\narch ", key.arch, "\nnvrtc ", key.nvrtc_version, "\nbytes ",
                      cubin.size(), "\nsha256 ", Sha256Hex(cubin), "\n\n");
}

}  // namespace

std::string DefaultKernelCacheDir() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
  };
  if (std::string dir = env("KILN_CACHE_DIR"); !dir.empty()) return dir;
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return (std::filesystem::path(xdg) / "kiln").string();
  if (std::string home = env("HOME"); !home.empty()) {
    return (std::filesystem::path(home) / ".cache" / "kiln").string();
  }
  return "";
}

std::string Sha256Hex(absl::string_view data) {
  Sha256 sha;
  sha.Update(data);
  return sha.HexDigest();
}

std::string KernelCacheKey::Digest() const {
  // Each field is length-prefixed, so no two different keys concatenate alike.
  Sha256 sha;
  auto field = [&](absl::string_view name, absl::string_view value) {
    sha.Update(absl::StrCat(name, " ", value.size(), ":"));
    sha.Update(value);
  };
  field("kiln-kernel-cache", "1");
  field("source", source_sha256);
  field("arch", arch);
  field("nvrtc", nvrtc_version);
  for (const std::string& o : options) field("option", o);
  return sha.HexDigest();
}

std::string KernelCache::EntryPath(const KernelCacheKey& key) const {
  const std::string digest = key.Digest();
  return (std::filesystem::path(dir_) / kSubdir / digest.substr(0, 2) / absl::StrCat(digest, ".cubin")).string();
}

KernelCache::Lookup KernelCache::Load(const KernelCacheKey& key, std::string* cubin) const {
  std::ifstream in(EntryPath(key), std::ios::binary);
  if (!in) return Lookup::kMiss;
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Lookup::kMiss;
  const size_t end = data.find("\n\n");
  if (end == std::string::npos || end > 4096) return Lookup::kCorrupt;
  std::vector<absl::string_view> lines = absl::StrSplit(absl::string_view(data).substr(0, end), '\n');
  if (lines.size() != 6 || lines[0] != kMagic) return Lookup::kCorrupt;
  auto value = [&](int i, absl::string_view name) -> absl::string_view {
    absl::string_view line = lines[i];
    if (line.size() <= name.size() || line.substr(0, name.size()) != name || line[name.size()] != ' ') return "";
    return line.substr(name.size() + 1);
  };
  uint64_t bytes = 0;
  if (value(1, "key") != key.Digest() || value(2, "arch") != key.arch || value(3, "nvrtc") != key.nvrtc_version ||
      !absl::SimpleAtoi(value(4, "bytes"), &bytes)) {
    return Lookup::kCorrupt;
  }
  absl::string_view payload = absl::string_view(data).substr(end + 2);
  if (payload.size() != bytes || value(5, "sha256") != Sha256Hex(payload)) return Lookup::kCorrupt;
  cubin->assign(payload.data(), payload.size());
  return Lookup::kHit;
}

absl::Status KernelCache::Store(const KernelCacheKey& key, absl::string_view cubin) const {
  namespace fs = std::filesystem;
  const fs::path path = EntryPath(key);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("kernel cache: cannot create ", path.parent_path().string(), ": ", ec.message()));
  }
  // A name no other writer uses (process, thread, counter); same directory, so the
  // rename is atomic.
  static std::atomic<uint64_t> counter{0};
  const fs::path tmp =
      absl::StrCat(path.string(), ".tmp.", getpid(), ".",
                   std::hash<std::thread::id>()(std::this_thread::get_id()) % 1000000, ".", counter.fetch_add(1));
  const std::string header = Header(key, cubin);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("kernel cache: cannot write ", tmp.string(), ": ", std::strerror(errno)));
  }
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(cubin.data(), 1, cubin.size(), f) == cubin.size();
  int saved_errno = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) saved_errno = errno != 0 ? errno : saved_errno;
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    saved_errno = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("kernel cache: cannot write ", path.string(), ": ", std::strerror(saved_errno)));
  }
  return absl::OkStatus();
}

}  // namespace kiln::codegen
