// File helpers (see files.h).
#include "common/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/random.h"

namespace tessera {
namespace {
std::string Errno(int err) { return std::strerror(err); }
}  // namespace

StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound("no such file '" + path + "'");
    return Status::Unavailable("cannot open '" + path + "': " + Errno(err));
  }
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return Status::DataLoss("read error in '" + path + "': " + Errno(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Unavailable("cannot open '" + path + "' to fsync: " + Errno(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Status::DataLoss("fsync '" + path + "' failed: " + Errno(err));
  return Status::OK();
}

Status WriteFileAtomic(const std::string& path, std::string_view data, int mode) {
  std::string tmp = path + ".tmp-" + NewUuid().substr(0, 8);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::Unavailable("cannot create '" + tmp + "': " + Errno(errno));
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::Unavailable("write to '" + tmp + "' failed: " + Errno(err));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status::DataLoss("fsync '" + tmp + "' failed: " + Errno(err));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Status::Unavailable("rename '" + tmp + "' to '" + path + "' failed: " + Errno(err));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  return FsyncPath(dir.empty() ? "." : dir);
}

StatusOr<std::string> MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/" + prefix + "XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    return Status::Unavailable("cannot create a temp dir '" + templ + "': " + Errno(errno));
  }
  return std::string(buf.data());
}

Status RemoveAll(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return Status::Unavailable("cannot remove '" + path + "': " + ec.message());
  return Status::OK();
}

std::string TailLines(const std::string& path, int lines) {
  if (lines <= 0) return "";
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return "";
  constexpr long kMax = 64 * 1024;
  std::fseek(f, 0, SEEK_END);
  long size = std::ftell(f);
  long from = size > kMax ? size - kMax : 0;
  std::fseek(f, from, SEEK_SET);
  std::string text(static_cast<size_t>(size - from), '\0');
  size_t got = std::fread(text.data(), 1, text.size(), f);
  std::fclose(f);
  text.resize(got);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  size_t pos = text.size();  // the start of the lines taken so far is pos + 1
  for (int n = 0; n < lines; ++n) {
    pos = pos == 0 ? std::string::npos : text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return text.substr(pos + 1);
}

bool OthersMayRead(const struct stat& st) {
  return (st.st_mode & 007) != 0 || ((st.st_mode & 070) != 0 && st.st_gid != ::getegid());
}

}  // namespace tessera
