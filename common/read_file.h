// Reads a whole file, refusing what is not a regular file, with errors a user can act
// on (the path and the reason in words). Every reader of user-named files goes
// through it, so a directory, a device or an unreadable path is an error, never an
// exception.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kiln {

// Errors: NotFound (no such file), InvalidArgument (a directory or other non-regular
// file), PermissionDenied, DataLoss (a read failed); each starts with the path.
inline absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    const std::string why = absl::StrCat(path, ": cannot open file: ", std::strerror(e));
    if (e == ENOENT || e == ENOTDIR) return absl::NotFoundError(why);
    if (e == EACCES || e == EPERM) return absl::PermissionDeniedError(why);
    return absl::InvalidArgumentError(why);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, dir ? ": is a directory, not a file" : ": not a regular file"));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t r = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int e = r < 0 ? errno : 0;
      ::close(fd);
      return absl::DataLossError(
          absl::StrCat(path, ": reading failed: ", e ? std::strerror(e) : "the file shrank while it was read"));
    }
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  return bytes;
}

}  // namespace kiln
