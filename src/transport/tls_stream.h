// TLS over one connected TCP socket, for the TCP data plane of a job created with --tls: the
// handshake (mutual: both ends present a certificate of the job's CA naming the job, see
// security/ssl_context.h), then reads and gathered writes with the same deadlines as the plain
// socket calls in stream_io.h. The socket is made non-blocking; a call without a deadline waits
// in poll() for as long as it takes, and a shutdown() of the socket from another thread
// (AbortableSocket::Abort, the server's Close) ends it at once.
// Payloads are encrypted from, and decrypted into, the caller's buffers: the only copies are
// OpenSSL's own record buffers, and the small pieces of a message (preamble, header) gathered
// with the start of its payload into one full record.
// Not thread-safe: one thread uses a stream at a time (as with the sockets it replaces).
#pragma once

#include <openssl/ssl.h>
#include <sys/uio.h>

#include <memory>
#include <string>

#include "common/clock.h"
#include "security/ssl_context.h"
#include "tessera/status.h"

namespace tessera {

class TlsStream {
 public:
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // Runs the handshake on `fd` (left open: the caller owns it). Unauthenticated when either end
  // refused the other's certificate, or the peer does not speak TLS; Unavailable or
  // DeadlineExceeded when the connection failed. `peer` names the other end in messages.
  static StatusOr<std::unique_ptr<TlsStream>> Handshake(int fd, SSL_CTX* ctx, security::TlsSide side,
                                                        const std::string& peer, const Deadline& deadline);

  // Reads between 1 and n bytes. Unavailable("connection closed by the peer") at the end of the
  // stream; Unauthenticated if the peer refused our certificate after the handshake (TLS 1.3
  // tells the client so on its first read).
  StatusOr<size_t> ReadSome(void* dst, size_t n, const Deadline* deadline);
  // Writes every byte of iov[0..n); the array is left in an unspecified state.
  Status WriteFully(iovec* iov, size_t n, const Deadline* deadline);
  // The negotiated protocol and cipher ("TLSv1.3 TLS_AES_128_GCM_SHA256"), for logs and tests.
  std::string Description() const;
  // Whether bytes already read from the socket wait in OpenSSL's buffers (a read may not need
  // the socket).
  bool buffered() const;

 private:
  TlsStream(SSL* ssl, int fd, std::string peer);
  Status WriteRecords(iovec* iov, size_t n, const Deadline* deadline);
  Status WriteAll(const char* p, size_t n, const Deadline* deadline);
  // Waits as OpenSSL asks after a call that returned `ret`, or turns its failure into a Status.
  Status WaitOrFail(int ret, const char* what, const Deadline* deadline);

  SSL* ssl_;
  int fd_;
  std::string peer_;
  std::unique_ptr<char[]> gather_;  // one record's worth of small pieces
};

}  // namespace tessera
