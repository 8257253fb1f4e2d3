// Archives users send (code packages, list-format data): tar (plain, gzip, xz, zstd, bzip2) or
// zip, read with libarchive. Every entry is checked before anything is written: only files and
// directories; no absolute path, no '..' component, no link or device; at most `max_entries`
// entries and `max_bytes` of content (counted as read, not as declared). A refused archive
// names the entry and why, and writes nothing under the destination that stays.
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera::server {

struct ArchiveLimits {
  int64_t max_bytes = int64_t{1} << 30;
  int max_entries = 100000;
};

struct ArchiveSummary {
  int files = 0;
  int64_t bytes = 0;
  std::vector<std::string> paths;  // the files, normalized ("a/b.py"), in archive order
};

// Checks every entry (InvalidArgument naming the first bad one).
StatusOr<ArchiveSummary> CheckArchive(const std::string& archive, const ArchiveLimits& limits);

// Checks, then writes the files under `dest` (created; it must not exist yet). On error, `dest`
// is removed.
StatusOr<ArchiveSummary> ExtractArchive(const std::string& archive, const std::string& dest,
                                        const ArchiveLimits& limits);

// The normalized relative path of an entry name ("./a//b" -> "a/b"), or InvalidArgument for an
// absolute path or a '..' component. Pure.
StatusOr<std::string> SafeRelativePath(const std::string& name);

}  // namespace tessera::server
