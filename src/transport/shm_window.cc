// A trainer's window of shared memory (see shm_window.h).
#include "transport/shm_window.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tessera {
namespace {

std::atomic<uint64_t> g_requests{0}, g_replies{0}, g_renewals{0};

Status Errno(const std::string& what) { return Status::Unavailable(what + ": " + std::strerror(errno)); }

size_t RoundToPages(size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

// A sealed memfd of `size` bytes (it can neither shrink nor grow under a peer that maps it),
// readable and writable by this user alone, as the transport's regions are.
StatusOr<UniqueFd> NewMemfd(size_t size) {
  UniqueFd fd(::memfd_create("tessera-window", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return Errno("memfd_create");
  if (::fchmod(fd.get(), 0600) != 0) return Errno("fchmod of the window");
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) return Errno("ftruncate of the window");
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return Errno("sealing the window");
  return fd;
}

}  // namespace

ShmWindow::~ShmWindow() {
  if (char* b = base_.load()) ::munmap(b, size_.load());
}

StatusOr<char*> ShmWindow::Allocate(size_t bytes) {
  MutexLock lock(&mu_);
  if (base_.load()) return Status::FailedPrecondition("the window was already allocated");
  if (bytes == 0) return Status::InvalidArgument("a window of 0 bytes");
  const size_t size = RoundToPages(bytes);
  void* m = MAP_FAILED;
  auto fd = NewMemfd(size);
  if (fd.ok()) m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
  const bool shared = m != MAP_FAILED;
  if (!shared) m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return Errno("mmap of a " + std::to_string(size) + "-byte window");
  if (shared) fd_ = std::move(*fd);
  generation_ = 1;
  size_.store(size, std::memory_order_release);
  shared_.store(shared, std::memory_order_release);
  base_.store(static_cast<char*>(m), std::memory_order_release);
  return static_cast<char*>(m);
}

int64_t ShmWindow::OffsetOf(const void* p, size_t n) const {
  const char* b = base_.load(std::memory_order_acquire);
  const char* c = static_cast<const char*>(p);
  if (!b || c < b) return -1;
  const size_t off = static_cast<size_t>(c - b);
  if (off > size() || n > size() - off) return -1;
  return static_cast<int64_t>(off);
}

uint64_t ShmWindow::generation() const {
  MutexLock lock(&mu_);
  return generation_;
}

UniqueFd ShmWindow::DuplicateFd(uint64_t* generation) const {
  MutexLock lock(&mu_);
  *generation = generation_;
  if (!fd_.valid()) return UniqueFd();
  return UniqueFd(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
}

bool ShmWindow::Still(uint64_t generation) const {
  MutexLock lock(&mu_);
  return generation_ == generation;
}

Status ShmWindow::Renew(uint64_t generation) {
  MutexLock lock(&mu_);
  char* base = base_.load();
  if (!base || generation != generation_) return Status::OK();  // renewed already
  ++generation_;
  g_renewals.fetch_add(1, std::memory_order_relaxed);
  const size_t size = size_.load();
  // The copy is made at a free address and then moved over the window's in one step, so the
  // window never shows anything but its contents.
  auto fd = NewMemfd(size);
  void* m = MAP_FAILED;
  if (fd.ok()) m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
  const bool shared = m != MAP_FAILED;
  if (!shared) m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    // No memory for a copy: the window stays, and nothing goes in place any more (a late
    // pserver thread could still write into it, as it could before this was tried).
    shared_.store(false, std::memory_order_release);
    fd_.Reset();
    return Errno("mmap of a renewed window");
  }
  std::memcpy(m, base, size);
  if (::mremap(m, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, base) == MAP_FAILED) {
    const Status s = Errno("mremap of the renewed window");
    ::munmap(m, size);
    shared_.store(false, std::memory_order_release);
    fd_.Reset();
    return s;
  }
  if (shared) {
    fd_ = std::move(*fd);
  } else {
    fd_.Reset();
    shared_.store(false, std::memory_order_release);
  }
  return Status::OK();
}

namespace {

template <class Buffer>
int64_t RunOf(const ShmWindow& w, std::span<const Buffer> bufs) {
  const char* start = nullptr;
  const char* end = nullptr;
  for (const auto& b : bufs) {
    if (b.size == 0) continue;
    const char* p = static_cast<const char*>(b.data);
    if (start && p != end) return -1;
    if (!start) start = p;
    end = p + b.size;
  }
  if (!start) return -1;
  return w.OffsetOf(start, static_cast<size_t>(end - start));
}

}  // namespace

int64_t WindowRunOf(const ShmWindow& w, std::span<const ConstBuffer> bufs) { return RunOf(w, bufs); }
int64_t WindowRunOf(const ShmWindow& w, std::span<const MutableBuffer> bufs) { return RunOf(w, bufs); }

WindowCounters WindowCountersNow() {
  return {g_requests.load(std::memory_order_relaxed), g_replies.load(std::memory_order_relaxed),
          g_renewals.load(std::memory_order_relaxed)};
}
std::string WindowSummary(const WindowCounters& c) {
  if (c.requests_in_place == 0 && c.replies_in_place == 0 && c.renewals == 0) return "";
  return "in place: " + std::to_string(c.requests_in_place) + " requests, " +
         std::to_string(c.replies_in_place) + " replies (" + std::to_string(c.renewals) +
         (c.renewals == 1 ? " renewal)" : " renewals)");
}

void CountWindowRequest() { g_requests.fetch_add(1, std::memory_order_relaxed); }
void CountWindowReply() { g_replies.fetch_add(1, std::memory_order_relaxed); }

}  // namespace tessera
