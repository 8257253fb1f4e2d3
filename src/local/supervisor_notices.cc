// Supervisor::ShowNotices (see supervisor_impl.h): the lines of the children's logs meant for the
// terminal, read as the logs grow.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local/supervisor_impl.h"

namespace tessera::local {

namespace {
// Read per log per call; a log that grows faster than this is caught up by skipping ahead.
constexpr int64_t kReadPerCall = 256 << 10;
constexpr int64_t kMostBehind = 4 << 20;
}  // namespace

void Supervisor::ShowNotices() {
  for (const auto& m : procs_) {
    if (m->spec.log_path.empty()) continue;
    // A log first seen is read from its end: what it held came before this run (--resume).
    const bool first = !notice_readers_.count(m->name());
    NoticeReader& r = notice_readers_[m->name()];
    const int fd = ::open(m->spec.log_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) == 0) {
      if (first) r.offset = st.st_size;
      if (st.st_size < r.offset) r.offset = 0;  // the log was started again
      if (st.st_size - r.offset > kMostBehind) r.offset = st.st_size - kReadPerCall;
      std::string buf(static_cast<size_t>(std::min<int64_t>(st.st_size - r.offset, kReadPerCall)), '\0');
      const ssize_t n = buf.empty() ? 0 : ::pread(fd, buf.data(), buf.size(), r.offset);
      if (n > 0) {
        r.offset += n;
        buf.resize(static_cast<size_t>(n));
        for (const auto& notice : r.notices.Feed(buf, Now())) console_.Event(m->name() + ": " + notice);
      }
    }
    ::close(fd);
  }
}

}  // namespace tessera::local
