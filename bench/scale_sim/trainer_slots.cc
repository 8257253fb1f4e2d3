// The shared trainer slots' mapping (see trainer_slots.h).
#include "trainer_slots.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace tessera::bench {
namespace {

size_t RegionBytes(int capacity) {
  return sizeof(TrainerRegion) + sizeof(TrainerSlot) * static_cast<size_t>(capacity > 1 ? capacity - 1 : 0);
}

Status Errno(const std::string& what, const std::string& path) {
  return Status::Internal(what + " " + (path.empty() ? "anonymous memory" : path) + ": " +
                          std::strerror(errno));
}

}  // namespace

Status TrainerSlot::Error() const {
  if (!ended() || failed.load() == 0) return Status::OK();
  return Status::Aborted(std::string(error, strnlen(error, sizeof error)));
}

StatusOr<MappedRegion> MappedRegion::Create(const std::string& path, int capacity) {
  if (capacity < 1) return Status::InvalidArgument("a trainer region needs at least one slot");
  const size_t bytes = RegionBytes(capacity);
  int fd = -1;
  if (!path.empty()) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return Errno("cannot create", path);
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      const Status s = Errno("cannot size", path);
      ::close(fd);
      return s;
    }
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | (fd < 0 ? MAP_ANONYMOUS : 0), fd, 0);
  if (fd >= 0) ::close(fd);
  if (p == MAP_FAILED) return Errno("cannot map", path);
  // The file (or memory) is zeroed; the atomics are constructed in place over it.
  auto* region = new (p) TrainerRegion;
  for (int i = 1; i < capacity; ++i) new (&region->slots[i]) TrainerSlot;
  region->capacity = capacity;
  return MappedRegion(region, bytes);
}

StatusOr<MappedRegion> MappedRegion::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(TrainerRegion)) {
    ::close(fd);
    return Status::InvalidArgument(path + " is not a trainer region (too short)");
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return Errno("cannot map", path);
  auto* region = static_cast<TrainerRegion*>(p);
  if (RegionBytes(static_cast<int>(region->capacity.load())) != bytes) {
    ::munmap(p, bytes);
    return Status::InvalidArgument(path + " is not a trainer region (its size does not match its capacity)");
  }
  return MappedRegion(region, bytes);
}

MappedRegion::~MappedRegion() {
  if (region_ != nullptr) ::munmap(region_, bytes_);
}

}  // namespace tessera::bench
