// A trainer's window of shared memory (see shm_window.h).
#include "transport/shm_window.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/shm_region.h"

namespace tessera {
namespace {

std::atomic<uint64_t> g_requests{0}, g_replies{0}, g_renewals{0};

size_t RoundToPages(size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

// Fresh zeroed memory of `size` bytes: a sealed memfd mapped shared (*fd set), or private memory
// when that fails (*fd left invalid). MAP_FAILED when neither can be had.
void* MapNew(size_t size, UniqueFd* fd) {
  auto memfd = NewSealedMemfd(size, "the window");
  if (memfd.ok()) {
    void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd->get(), 0);
    if (m != MAP_FAILED) {
      *fd = std::move(*memfd);
      return m;
    }
  }
  return ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

// Copies `from`'s contents to the fresh zeroed `to`: only the ranges its memfd `fd` holds data
// in (SEEK_DATA, SEEK_HOLE), so a renewal does not fill the new memory's holes with zeros (a
// window's staging runs, untouched by most jobs, stay address space); all of it without a memfd.
void CopyWritten(const UniqueFd& fd, const char* from, char* to, size_t size) {
  if (!fd.valid()) {
    std::memcpy(to, from, size);
    return;
  }
  off_t at = 0;
  while (static_cast<size_t>(at) < size) {
    const off_t data = ::lseek(fd.get(), at, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) return;                                       // only holes from here
      std::memcpy(to + at, from + at, size - static_cast<size_t>(at));  // cannot tell: copy the rest
      return;
    }
    off_t hole = ::lseek(fd.get(), data, SEEK_HOLE);
    if (hole < 0 || static_cast<size_t>(hole) > size) hole = static_cast<off_t>(size);
    std::memcpy(to + data, from + data, static_cast<size_t>(hole - data));
    at = hole;
  }
}

}  // namespace

ShmWindow::~ShmWindow() {
  if (char* b = base_.load()) ::munmap(b, size_.load());
}

StatusOr<char*> ShmWindow::Allocate(size_t bytes) {
  MutexLock lock(&mu_);
  if (base_.load()) return Status::FailedPrecondition("the window was already allocated");
  if (bytes == 0) return Status::InvalidArgument("a window of 0 bytes");
  if (bytes > kMaxWindowBytes) {
    return Status::InvalidArgument("a window of " + std::to_string(bytes) + " bytes is more than the " +
                                   std::to_string(kMaxWindowBytes) + " a pserver maps");
  }
  // The last cache lines are the progress words' (never inside the caller's `bytes`).
  const size_t size = RoundToPages(bytes + kProgressBytes * (kProgressSlots + 1));
  UniqueFd fd;
  void* m = MapNew(size, &fd);
  if (m == MAP_FAILED) return ShmErrno("mmap of a " + std::to_string(size) + "-byte window");
  shared_.store(fd.valid(), std::memory_order_release);
  fd_ = std::move(fd);
  generation_.store(1, std::memory_order_release);
  size_.store(size, std::memory_order_release);
  base_.store(static_cast<char*>(m), std::memory_order_release);
  return static_cast<char*>(m);
}

std::atomic<uint64_t>* ShmWindow::progress_word() const {
  char* b = base_.load(std::memory_order_acquire);
  if (!b) return nullptr;
  return reinterpret_cast<std::atomic<uint64_t>*>(b + progress_offset());
}

std::atomic<uint64_t>* ShmWindow::progress_slot(int i) const {
  char* b = base_.load(std::memory_order_acquire);
  if (!b || i < 0 || i >= kProgressSlots) return nullptr;
  return reinterpret_cast<std::atomic<uint64_t>*>(b + progress_offset() - kProgressBytes * (i + 1));
}

int64_t ShmWindow::OffsetOf(const void* p, size_t n) const {
  const char* b = base_.load(std::memory_order_acquire);
  const char* c = static_cast<const char*>(p);
  if (!b || c < b) return -1;
  const size_t off = static_cast<size_t>(c - b);
  if (off > size() || n > size() - off) return -1;
  return static_cast<int64_t>(off);
}

uint64_t ShmWindow::generation() const { return generation_.load(std::memory_order_acquire); }

UniqueFd ShmWindow::DuplicateFd(uint64_t* generation) const {
  MutexLock lock(&mu_);
  *generation = generation_.load(std::memory_order_relaxed);
  if (!fd_.valid()) return UniqueFd();
  return UniqueFd(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
}

bool ShmWindow::Still(uint64_t generation) const {
  MutexLock lock(&mu_);
  return generation_.load(std::memory_order_relaxed) == generation;
}

Status ShmWindow::Renew(uint64_t generation) {
  MutexLock lock(&mu_);
  char* base = base_.load();
  if (!base || generation != generation_.load(std::memory_order_relaxed))
    return Status::OK();  // renewed already
  generation_.fetch_add(1, std::memory_order_acq_rel);
  g_renewals.fetch_add(1, std::memory_order_relaxed);
  const size_t size = size_.load();
  // The copy is made at a free address and then moved over the window's in one step, so the
  // window never shows anything but its contents.
  // Without a copy in place the window stays, and nothing goes in place any more (a late
  // pserver thread could still write into it, as it could before this was tried).
  auto give_up = [&](const Status& s) REQUIRES(mu_) {
    shared_.store(false, std::memory_order_release);
    fd_.Reset();
    return s;
  };
  UniqueFd fd;
  void* m = MapNew(size, &fd);
  if (m == MAP_FAILED) return give_up(ShmErrno("mmap of a renewed window"));
  CopyWritten(fd_, base, static_cast<char*>(m), size);
  if (::mremap(m, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, base) == MAP_FAILED) {
    const Status s = ShmErrno("mremap of the renewed window");
    ::munmap(m, size);
    return give_up(s);
  }
  if (!fd.valid()) shared_.store(false, std::memory_order_release);
  fd_ = std::move(fd);
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
