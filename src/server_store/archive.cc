// Reading users' archives safely (see archive.h).
#include "server_store/archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>

#include "common/files.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;

struct ArchiveCloser {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<struct archive, ArchiveCloser>;

StatusOr<ArchivePtr> OpenArchive(const std::string& path) {
  ArchivePtr a(archive_read_new());
  if (!a) return Status::Internal("libarchive: out of memory");
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  archive_read_support_format_zip(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK) {
    return Status::InvalidArgument(std::string("not a tar or zip archive: ") + archive_error_string(a.get()));
  }
  return a;
}

// Walks the archive; `write` (may be null) gets each file's path and the archive to read its
// data from.
StatusOr<ArchiveSummary> Walk(
    const std::string& path, const ArchiveLimits& limits,
    const std::function<Status(const std::string&, struct archive*, int64_t*)>& write) {
  TESSERA_ASSIGN_OR_RETURN(ArchivePtr a, OpenArchive(path));
  ArchiveSummary sum;
  int entries = 0;
  for (;;) {
    struct archive_entry* e = nullptr;
    int rc = archive_read_next_header(a.get(), &e);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
      return Status::InvalidArgument(std::string("archive: ") + archive_error_string(a.get()));
    }
    if (++entries > limits.max_entries) {
      return Status::InvalidArgument("archive: more than " + std::to_string(limits.max_entries) + " entries");
    }
    const char* raw = archive_entry_pathname(e);
    const std::string name = raw ? raw : "";
    TESSERA_ASSIGN_OR_RETURN(std::string rel, SafeRelativePath(name));
    const mode_t type = archive_entry_filetype(e);
    if (archive_entry_hardlink(e) != nullptr || type == AE_IFLNK) {
      return Status::InvalidArgument("archive: entry '" + name +
                                     "' is a link; only files and directories are accepted");
    }
    if (type == AE_IFDIR) continue;
    if (type != AE_IFREG) {
      return Status::InvalidArgument("archive: entry '" + name + "' is not a file or a directory");
    }
    if (rel.empty()) return Status::InvalidArgument("archive: a file entry has no name");
    // A sparse member would be written with holes: small in the archive, as large as it says on
    // disk. Refused; and every member counts by the size it declares, not the data it carries.
    if (archive_entry_sparse_count(e) > 0)
      return Status::InvalidArgument("archive: entry '" + name +
                                     "' is a sparse file; only plain files and directories are accepted");
    const int64_t declared = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
    if (declared < 0 || sum.bytes + declared > limits.max_bytes)
      return Status::InvalidArgument("archive: entry '" + name + "' is " + std::to_string(declared) +
                                     " bytes, past the " + std::to_string(limits.max_bytes) +
                                     " bytes of content allowed");
    int64_t n = 0;
    if (write) {
      TESSERA_RETURN_IF_ERROR(write(rel, a.get(), &n));
    } else {
      const void* buf;
      size_t size;
      la_int64_t offset;
      for (;;) {
        int r = archive_read_data_block(a.get(), &buf, &size, &offset);
        if (r == ARCHIVE_EOF) break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
          return Status::InvalidArgument("archive: entry '" + name + "': " + archive_error_string(a.get()));
        n += static_cast<int64_t>(size);
        if (sum.bytes + n > limits.max_bytes) break;
      }
    }
    sum.bytes += std::max(n, declared);
    if (sum.bytes > limits.max_bytes) {
      return Status::InvalidArgument("archive: more than " + std::to_string(limits.max_bytes) +
                                     " bytes of content");
    }
    ++sum.files;
    sum.paths.push_back(rel);
  }
  return sum;
}

}  // namespace

StatusOr<std::string> SafeRelativePath(const std::string& name) {
  if (name.empty()) return std::string();
  if (name[0] == '/' || name[0] == '\\') {
    return Status::InvalidArgument("archive: entry '" + name + "' has an absolute path");
  }
  if (name.find('\0') != std::string::npos || name.find('\\') != std::string::npos) {
    return Status::InvalidArgument("archive: entry '" + name + "' has a backslash or NUL in its name");
  }
  std::string out;
  size_t i = 0;
  while (i <= name.size()) {
    size_t j = name.find('/', i);
    if (j == std::string::npos) j = name.size();
    std::string part = name.substr(i, j - i);
    if (part == "..")
      return Status::InvalidArgument("archive: entry '" + name + "' leaves its directory ('..')");
    if (!part.empty() && part != ".") out += (out.empty() ? "" : "/") + part;
    i = j + 1;
  }
  return out;
}

StatusOr<ArchiveSummary> CheckArchive(const std::string& archive, const ArchiveLimits& limits) {
  return Walk(archive, limits, nullptr);
}

StatusOr<ArchiveSummary> ExtractArchive(const std::string& archive, const std::string& dest,
                                        const ArchiveLimits& limits) {
  // Checked in full first, so that nothing of a bad archive is written.
  TESSERA_ASSIGN_OR_RETURN(ArchiveSummary checked, CheckArchive(archive, limits));
  (void)checked;
  std::error_code ec;
  if (fs::exists(dest, ec)) return Status::AlreadyExists("'" + dest + "' exists");
  fs::create_directories(dest, ec);
  if (ec) return Status::Unavailable("cannot create '" + dest + "': " + ec.message());
  int64_t total = 0;
  auto write = [&](const std::string& rel, struct archive* a, int64_t* n) -> Status {
    const fs::path target = fs::path(dest) / rel;
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      return Status::Unavailable("cannot create '" + target.parent_path().string() + "': " + ec.message());
    // O_EXCL|O_NOFOLLOW: an entry never writes through something already there.
    int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
      return Status::InvalidArgument("archive: cannot write entry '" + rel + "': " + std::strerror(errno));
    const void* buf;
    size_t size;
    la_int64_t offset;
    Status st;
    for (;;) {
      int r = archive_read_data_block(a, &buf, &size, &offset);
      if (r == ARCHIVE_EOF) break;
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
        st = Status::InvalidArgument("archive: entry '" + rel + "': " + archive_error_string(a));
        break;
      }
      total += static_cast<int64_t>(size);
      if (total > limits.max_bytes || offset < 0 || offset + static_cast<int64_t>(size) > limits.max_bytes) {
        st = Status::InvalidArgument("archive: more than " + std::to_string(limits.max_bytes) +
                                     " bytes of content");
        break;
      }
      if (::pwrite(fd, buf, size, offset) != static_cast<ssize_t>(size)) {
        st = Status::Unavailable("cannot write '" + target.string() + "': " + std::strerror(errno));
        break;
      }
      *n += static_cast<int64_t>(size);
    }
    ::close(fd);
    return st;
  };
  auto sum = Walk(archive, limits, write);
  if (!sum.ok()) (void)RemoveAll(dest);
  return sum;
}

}  // namespace tessera::server
