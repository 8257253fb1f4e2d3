// TLS over a TCP socket (see tls_stream.h).
#include "transport/tls_stream.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "transport/stream_io.h"

namespace tessera {
namespace {

constexpr size_t kRecordBytes = 16384;  // the most plaintext one TLS record carries
// A message larger than this is written corked: the kernel sends full segments rather than one
// per record (measured: a sixth more throughput at 16 MiB).
constexpr size_t kCorkBytes = 64 * 1024;

// Why OpenSSL failed, from the first queued error: the peer refused our certificate, or it is
// not speaking TLS at all. Anything else is a broken connection.
enum class SslFailure { kPeerRefusedUs, kNotTls, kOther };

SslFailure Classify(unsigned long e) {
  if (ERR_GET_LIB(e) != ERR_LIB_SSL) return SslFailure::kOther;
  switch (ERR_GET_REASON(e)) {
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
      return SslFailure::kPeerRefusedUs;
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_HTTP_REQUEST:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_UNKNOWN_PROTOCOL:
    case SSL_R_RECORD_LENGTH_MISMATCH:
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
      return SslFailure::kNotTls;
    default:
      return SslFailure::kOther;
  }
}

// OpenSSL's own socket BIO writes with write(), which raises SIGPIPE on a connection the peer
// (or Abort) closed; this one sends with MSG_NOSIGNAL, so a broken connection is an error to
// report, never a signal that ends the process. The BIO's data is the socket.
struct SocketBioState {
  int fd;
  bool eof = false;
};

int BioWrite(BIO* b, const char* data, size_t n, size_t* done) {
  BIO_clear_retry_flags(b);
  auto* st = static_cast<SocketBioState*>(BIO_get_data(b));
  ssize_t r = ::send(st->fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (r >= 0) {
    *done = static_cast<size_t>(r);
    return 1;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_write(b);
  return 0;
}

int BioRead(BIO* b, char* data, size_t n, size_t* done) {
  BIO_clear_retry_flags(b);
  auto* st = static_cast<SocketBioState*>(BIO_get_data(b));
  ssize_t r = ::recv(st->fd, data, n, MSG_DONTWAIT);
  if (r > 0) {
    *done = static_cast<size_t>(r);
    return 1;
  }
  if (r == 0) {
    st->eof = true;
  } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
    BIO_set_retry_read(b);
  }
  return 0;
}

long BioCtrl(BIO* b, int cmd, long, void*) {
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;
    case BIO_CTRL_EOF:
      return static_cast<SocketBioState*>(BIO_get_data(b))->eof ? 1 : 0;
    default:
      return 0;
  }
}

int BioDestroy(BIO* b) {
  delete static_cast<SocketBioState*>(BIO_get_data(b));
  BIO_set_data(b, nullptr);
  return 1;
}

const BIO_METHOD* SocketBioMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tessera socket");
    BIO_meth_set_write_ex(m, BioWrite);
    BIO_meth_set_read_ex(m, BioRead);
    BIO_meth_set_ctrl(m, BioCtrl);
    BIO_meth_set_destroy(m, BioDestroy);
    return m;
  }();
  return method;
}

// A BIO on `fd` (not closed with it); null if OpenSSL cannot make one.
BIO* NewSocketBio(int fd) {
  BIO* b = BIO_new(SocketBioMethod());
  if (!b) return nullptr;
  BIO_set_data(b, new SocketBioState{fd});
  BIO_set_init(b, 1);
  return b;
}

}  // namespace

TlsStream::TlsStream(SSL* ssl, int fd, std::string peer)
    : ssl_(ssl), fd_(fd), peer_(std::move(peer)), gather_(new char[kRecordBytes]) {}

TlsStream::~TlsStream() { SSL_free(ssl_); }  // the socket stays open: its owner closes it

StatusOr<std::unique_ptr<TlsStream>> TlsStream::Handshake(int fd, SSL_CTX* ctx, security::TlsSide side,
                                                          const std::string& peer, const Deadline& deadline) {
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx);
  if (!ssl) return Status::Internal(security::SslErrors("SSL_new failed"));
  std::unique_ptr<TlsStream> s(new TlsStream(ssl, fd, peer));
  BIO* bio = NewSocketBio(fd);
  if (!bio) return Status::Internal(security::SslErrors("BIO_new failed"));
  SSL_set_bio(ssl, bio, bio);  // the SSL owns it now
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  const bool server = side == security::TlsSide::kServer;
  while (true) {
    int r = server ? SSL_accept(ssl) : SSL_connect(ssl);
    if (r == 1) return s;
    TESSERA_RETURN_IF_ERROR(s->WaitOrFail(r, "TLS handshake", &deadline));
  }
}

Status TlsStream::WaitOrFail(int ret, const char* what, const Deadline* deadline) {
  const int saved_errno = errno;
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_WANT_READ:
      ERR_clear_error();
      return WaitFd(fd_, POLLIN, deadline);
    case SSL_ERROR_WANT_WRITE:
      ERR_clear_error();
      return WaitFd(fd_, POLLOUT, deadline);
    case SSL_ERROR_ZERO_RETURN:
      ERR_clear_error();
      return Status::Unavailable("connection closed by the peer");
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_error() == 0) {
        ERR_clear_error();
        if (saved_errno == 0 || saved_errno == ECONNRESET || saved_errno == EPIPE)
          return Status::Unavailable("connection closed by the peer");
        return Status::Unavailable(std::string(what) + ": " + std::strerror(saved_errno));
      }
      break;
    default:
      break;
  }
  const long verify = SSL_get_verify_result(ssl_);
  if (verify != X509_V_OK) {
    ERR_clear_error();
    return Status::Unauthenticated(peer_ + " presented a TLS certificate that is not this job's (" +
                                   X509_verify_cert_error_string(verify) + ")");
  }
  const SslFailure kind = Classify(ERR_peek_error());
  const std::string detail = security::SslErrors("no detail");
  switch (kind) {
    case SslFailure::kPeerRefusedUs:
      return Status::Unauthenticated(peer_ +
                                     " refused this node's TLS certificate (is it signed by the job's CA "
                                     "and for this job?): " +
                                     detail);
    case SslFailure::kNotTls:
      return Status::Unauthenticated(peer_ +
                                     " does not speak TLS (a pserver or client of a job without "
                                     "--tls?): " +
                                     detail);
    case SslFailure::kOther:
      break;
  }
  return Status::Unavailable(std::string(what) + " with " + peer_ + " failed: " + detail);
}

bool TlsStream::buffered() const { return SSL_has_pending(ssl_) == 1; }

StatusOr<size_t> TlsStream::ReadSome(void* dst, size_t n, const Deadline* deadline) {
  ERR_clear_error();
  while (true) {
    size_t got = 0;
    errno = 0;
    int r = SSL_read_ex(ssl_, dst, n, &got);
    if (r == 1) return got;
    TESSERA_RETURN_IF_ERROR(WaitOrFail(r, "TLS read", deadline));
  }
}

Status TlsStream::WriteAll(const char* p, size_t n, const Deadline* deadline) {
  ERR_clear_error();
  while (n > 0) {
    size_t w = 0;
    errno = 0;
    int r = SSL_write_ex(ssl_, p, n, &w);
    if (r == 1) {
      p += w;
      n -= w;
      continue;
    }
    TESSERA_RETURN_IF_ERROR(WaitOrFail(r, "TLS write", deadline));
  }
  return Status::OK();
}

Status TlsStream::WriteFully(iovec* iov, size_t n, const Deadline* deadline) {
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += iov[i].iov_len;
  const bool cork = total > kCorkBytes;
  int on = 1;
  if (cork) ::setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
  Status s = WriteRecords(iov, n, deadline);
  if (cork) {
    int off = 0;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &off, sizeof off);
  }
  return s;
}

Status TlsStream::WriteRecords(iovec* iov, size_t n, const Deadline* deadline) {
  // Small pieces are gathered, and topped up from the next large one, so every record but the
  // last of a message is full.
  size_t used = 0;
  for (size_t i = 0; i < n; ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    size_t len = iov[i].iov_len;
    if (used + len <= kRecordBytes) {
      if (len) std::memcpy(gather_.get() + used, p, len);
      used += len;
      continue;
    }
    if (used > 0) {
      const size_t k = kRecordBytes - used;
      std::memcpy(gather_.get() + used, p, k);
      p += k;
      len -= k;
      TESSERA_RETURN_IF_ERROR(WriteAll(gather_.get(), kRecordBytes, deadline));
      used = 0;
    }
    TESSERA_RETURN_IF_ERROR(WriteAll(p, len, deadline));
  }
  return used > 0 ? WriteAll(gather_.get(), used, deadline) : Status::OK();
}

std::string TlsStream::Description() const {
  return std::string(SSL_get_version(ssl_)) + " " + SSL_get_cipher_name(ssl_);
}

}  // namespace tessera
