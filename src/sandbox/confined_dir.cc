// ConfinedDir (see confined_dir.h).
#include "sandbox/confined_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/strings.h"

namespace tessera::sandbox {

namespace {

Status Refused(std::string_view rel, const std::string& why) {
  return Status::PermissionDenied("'" + std::string(rel) + "' " + why + "; not read");
}

Status FromErrno(std::string_view rel, int err) {
  if (err == ENOENT) return Status::NotFound("no file '" + std::string(rel) + "'");
  if (err == ELOOP) return Refused(rel, "is or passes through a link");
  if (err == EXDEV) return Refused(rel, "leads out of its directory");
  if (err == ENOTDIR) return Refused(rel, "passes through something that is not a directory");
  return Status::Unavailable("cannot open '" + std::string(rel) + "': " + std::strerror(err));
}

// Component by component, for kernels without openat2 (before 5.6).
int OpenByComponents(int root, const std::vector<std::string>& parts, int last_flags) {
  int cur = ::dup(root);
  for (size_t i = 0; i < parts.size() && cur >= 0; ++i) {
    const bool last = i + 1 == parts.size();
    int next = ::openat(cur, parts[i].c_str(),
                        last ? last_flags | O_NOFOLLOW : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int err = errno;
    ::close(cur);
    errno = err;
    cur = next;
  }
  return cur;
}

}  // namespace

StatusOr<UniqueFd> ConfinedDir::OpenBeneath(std::string_view rel, bool directory) const {
  const std::vector<std::string> parts = Split(rel, '/', false);
  if (rel.empty() || rel.front() == '/' || std::any_of(parts.begin(), parts.end(), [](const std::string& p) {
        return p.empty() || p == "." || p == "..";
      }))
    return Refused(rel, "is not a plain relative path");
  UniqueFd root(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) return FromErrno(root_, errno);
  const int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (directory ? O_DIRECTORY : 0);
  open_how how{};
  how.flags = static_cast<uint64_t>(flags);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  int fd = static_cast<int>(::syscall(SYS_openat2, root.get(), std::string(rel).c_str(), &how, sizeof how));
  if (fd < 0 && (errno == ENOSYS || errno == EPERM)) fd = OpenByComponents(root.get(), parts, flags);
  if (fd < 0) return FromErrno(rel, errno);
  UniqueFd out(fd);
  struct stat st {};
  if (::fstat(out.get(), &st) != 0) return FromErrno(rel, errno);
  if (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
    return Refused(rel, directory ? "is not a directory" : "is not a regular file");
  return out;
}

StatusOr<UniqueFd> ConfinedDir::Open(std::string_view rel) const { return OpenBeneath(rel, false); }

int64_t ConfinedDir::Size(std::string_view rel) const {
  auto fd = Open(rel);
  if (!fd.ok()) return -1;
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return -1;
  return st.st_size;
}

StatusOr<std::string> ConfinedDir::Read(std::string_view rel, int64_t max_bytes) const {
  TESSERA_ASSIGN_OR_RETURN(UniqueFd fd, Open(rel));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return FromErrno(rel, errno);
  if (st.st_size > max_bytes)
    return Status::ResourceExhausted("'" + std::string(rel) + "' holds " + std::to_string(st.st_size) +
                                     " bytes, more than the " + std::to_string(max_bytes) + " read here");
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FromErrno(rel, errno);
    if (n == 0) break;
    if (static_cast<int64_t>(out.size()) + n > max_bytes)
      return Status::ResourceExhausted("'" + std::string(rel) + "' grew past the " +
                                       std::to_string(max_bytes) + " bytes read here");
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string ConfinedDir::ReadRange(std::string_view rel, int64_t offset, int64_t max_bytes) const {
  auto fd = Open(rel);
  if (!fd.ok() || offset < 0 || max_bytes <= 0) return "";
  std::string out(static_cast<size_t>(std::min<int64_t>(max_bytes, 64 << 20)), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(fd->get(), out.data() + got, out.size() - got, offset + static_cast<int64_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

std::string ConfinedDir::TailLines(std::string_view rel, int lines) const {
  const int64_t size = Size(rel);
  if (size <= 0) return "";
  const int64_t from = std::max<int64_t>(0, size - (64 << 10));
  std::string text = ReadRange(rel, from, size - from);
  size_t at = text.size();
  if (at > 0 && text[at - 1] == '\n') --at;
  for (int seen = 0; at > 0; --at) {
    if (text[at - 1] == '\n' && ++seen >= lines) break;
  }
  return text.substr(at);
}

std::vector<std::string> ConfinedDir::Files(std::string_view rel, std::string_view suffix) const {
  std::vector<std::string> names;
  auto dir = OpenBeneath(rel, true);
  if (!dir.ok()) return names;
  DIR* d = ::fdopendir(dir->Release());
  if (!d) return names;
  for (dirent* e; (e = ::readdir(d)) != nullptr && names.size() < 10000;) {
    const std::string name = e->d_name;
    if (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
      names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tessera::sandbox
