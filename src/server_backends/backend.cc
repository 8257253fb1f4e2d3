// What every backend shares (see backend.h).
#include "server_backends/backend.h"

#include <sys/stat.h>

#include <filesystem>

namespace tessera::server {

int64_t Backend::DiskBytes(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  int64_t bytes = 0, entries = 0;
  // The walk follows no link (a job may leave links to anywhere) and counts each entry's blocks.
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator() && ++entries < 2000000; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0) bytes += static_cast<int64_t>(st.st_blocks) * 512;
  }
  return bytes;
}

}  // namespace tessera::server
