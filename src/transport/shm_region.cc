// Shared-memory regions and seqpacket frames (see shm_region.h).
#include "transport/shm_region.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace tessera {

Status ShmErrno(const std::string& what) { return Status::Unavailable(what + ": " + std::strerror(errno)); }

StatusOr<UniqueFd> NewSealedMemfd(size_t size, const char* what) {
  UniqueFd fd(::memfd_create("tessera-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return ShmErrno(std::string("memfd_create for ") + what);
  if (::fchmod(fd.get(), 0600) != 0) return ShmErrno(std::string("fchmod of ") + what);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
    return ShmErrno(std::string("ftruncate of ") + what);
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return ShmErrno(std::string("sealing ") + what);
  return fd;
}

void OwnRegion::Unmap() {
  if (map_) ::munmap(map_, size_);
  map_ = nullptr;
  size_ = 0;
}

Status OwnRegion::Ensure(size_t bytes, size_t keep, size_t max_bytes) {
  if (bytes <= size_ && map_) return Status::OK();
  if (bytes > max_bytes) {
    return Status::InvalidArgument("a message of " + std::to_string(bytes) +
                                   " bytes is larger than the maximum " + std::to_string(max_bytes));
  }
  size_t size = size_t{1} << 20;
  while (size < bytes) size *= 2;
  if (size > max_bytes) size = (bytes + 4095) & ~size_t{4095};
  TESSERA_ASSIGN_OR_RETURN(UniqueFd fd, NewSealedMemfd(size, "the shared region"));
  void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (m == MAP_FAILED) return ShmErrno("mmap of a shared-memory region");
  if (keep) std::memcpy(m, map_, std::min(keep, size_));
  Unmap();
  map_ = static_cast<char*>(m);
  size_ = size;
  pending_ = std::move(fd);
  return Status::OK();
}

void PeerRegion::Unmap() {
  if (map_) ::munmap(const_cast<char*>(map_), size_);
  map_ = nullptr;
  size_ = 0;
}

Status PeerRegion::Map(UniqueFd fd, size_t max_bytes, bool writable) {
  int seals = ::fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    return Status::InvalidArgument("the shared region is not a memfd sealed against shrinking");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ShmErrno("fstat of a shared region");
  if (st.st_size <= 0 || static_cast<uint64_t>(st.st_size) > max_bytes) {
    return Status::InvalidArgument("the shared region has " + std::to_string(st.st_size) +
                                   " bytes (at most " + std::to_string(max_bytes) + " allowed)");
  }
  void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | (writable ? PROT_WRITE : 0),
                   MAP_SHARED, fd.get(), 0);
  if (m == MAP_FAILED) return ShmErrno("mmap of the peer's shared region");
  Unmap();
  map_ = static_cast<const char*>(m);
  size_ = static_cast<size_t>(st.st_size);
  return Status::OK();
}

ssize_t SendWithDescriptor(int sock, const void* data, size_t n, int pass_fd, int flags) {
  iovec iov{const_cast<void*>(data), n};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (pass_fd >= 0) {
    std::memset(control, 0, sizeof control);
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  return ::sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
}

Status SendFrame(int sock, const uint8_t (&preamble)[kFramePreambleBytes], int pass_fd,
                 const Deadline* deadline) {
  TESSERA_ASSIGN_OR_RETURN(size_t w, RetrySocketCall(sock, POLLOUT, deadline, "send", [&] {
                             return SendWithDescriptor(sock, preamble, kFramePreambleBytes, pass_fd,
                                                       deadline ? MSG_DONTWAIT : 0);
                           }));
  if (w != kFramePreambleBytes) return Status::Unavailable("short send of a frame");
  return Status::OK();
}

Status RecvFrame(int sock, uint8_t (&preamble)[kFramePreambleBytes], UniqueFd* fd, const Deadline* deadline) {
  *fd = UniqueFd();
  iovec iov{preamble, kFramePreambleBytes};
  msghdr msg{};
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
  TESSERA_ASSIGN_OR_RETURN(size_t r, RetrySocketCall(sock, POLLIN, deadline, "recv", [&] {
                             msg = msghdr{};  // recvmsg changes it: a retry starts afresh
                             msg.msg_iov = &iov;
                             msg.msg_iovlen = 1;
                             msg.msg_control = control;
                             msg.msg_controllen = sizeof control;
                             return ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | (deadline ? MSG_DONTWAIT : 0));
                           }));
  // Collect every descriptor that came, so none leaks whatever else is wrong.
  int got = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int f;
      std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
      if (got++ == 0) {
        *fd = UniqueFd(f);
      } else {
        ::close(f);
      }
    }
  }
  if (r == 0) return Status::Cancelled("closed");
  if (got > 1) return Status::InvalidArgument("a frame came with " + std::to_string(got) + " descriptors");
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
    return Status::InvalidArgument("a message longer than a frame preamble (or with too many descriptors)");
  }
  if (r != kFramePreambleBytes) {
    return Status::InvalidArgument("a message of " + std::to_string(r) + " bytes is not a frame preamble");
  }
  return Status::OK();
}

Status SendGreeting(int sock, const uint8_t (&greeting)[kGreetingBytes], const Deadline* deadline) {
  TESSERA_ASSIGN_OR_RETURN(size_t w, RetrySocketCall(sock, POLLOUT, deadline, "send", [&] {
                             return SendWithDescriptor(sock, greeting, kGreetingBytes, -1,
                                                       deadline ? MSG_DONTWAIT : 0);
                           }));
  if (w != kGreetingBytes) return Status::Unavailable("short send of the greeting");
  return Status::OK();
}

Status RecvGreeting(int sock, uint8_t (&greeting)[kGreetingBytes], const Deadline* deadline) {
  TESSERA_ASSIGN_OR_RETURN(size_t r, RetrySocketCall(sock, POLLIN, deadline, "recv", [&] {
                             return ::recv(sock, greeting, kGreetingBytes,
                                           MSG_TRUNC | (deadline ? MSG_DONTWAIT : 0));
                           }));
  if (r == 0) return Status::Unavailable("the pserver closed the connection before its greeting");
  if (r != kGreetingBytes)
    return Status::Unavailable("a message of " + std::to_string(r) + " bytes is not a greeting");
  return Status::OK();
}

}  // namespace tessera
