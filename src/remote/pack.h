// Packing a directory of code into a job's package: a gzipped tar, built in memory, the same
// bytes for the same files (entries sorted, times and owners zeroed), so an unchanged directory
// is stored once by the server (packages are content-addressed). Left out: version-control and
// cache directories (.git, __pycache__, .venv, ...), *.pyc, and what `.tesseraignore` lists;
// symbolic links and special files are skipped and reported. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera::remote {

struct PackLimits {
  int64_t max_compressed = int64_t{4} << 20;  // the server's limit on a package
  int64_t max_raw = int64_t{256} << 20;
  int max_files = 20000;
};

struct Package {
  std::string bytes;   // the .tar.gz
  std::string sha256;  // of `bytes`, the package's name on the server
  int files = 0;
  int64_t raw_bytes = 0;
  std::vector<std::string> skipped;  // "path (a symbolic link)"
};

StatusOr<Package> PackDirectory(const std::string& dir, const PackLimits& limits = {});

// .tesseraignore's patterns: one per line; blank lines and lines starting with '#' are
// ignored. Pure.
std::vector<std::string> ParseIgnorePatterns(const std::string& text);

// Whether `rel` (a path relative to the packed directory, "a/b.py") is left out. A pattern
// without '/' matches any path's last component ("*.csv", "data"); one with '/' matches the whole
// relative path ("data/*.bin", "/build"); a trailing '/' matches directories only. Pure.
bool IsIgnored(const std::string& rel, bool is_dir, const std::vector<std::string>& patterns);

}  // namespace tessera::remote
