// Atomic whole-file writes (common/write_file.h).
#include "common/write_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/temp_files.h"

namespace kiln {

absl::Status WriteFile(const std::string& path, absl::string_view data, absl::string_view what) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrCat(what, ": cannot write ", path, ": cannot create a file in ",
                                                    dir.string(), ": ", std::strerror(errno)));
  }
  ScopedTempFile guard(tmp);
  int err = 0;
  size_t done = 0;
  while (done < data.size() && err == 0) {
    const ssize_t w = ::write(fd, data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) err = w < 0 ? errno : EIO;
    else done += static_cast<size_t>(w);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    std::remove(tmp.c_str());
    return absl::DataLossError(absl::StrCat(what, ": writing ", path, " failed: ", std::strerror(err)));
  }
  ::chmod(tmp.c_str(), 0644);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    return absl::PermissionDeniedError(absl::StrCat(what, ": cannot write ", path, ": ", std::strerror(e)));
  }
  return absl::OkStatus();
}

}  // namespace kiln
