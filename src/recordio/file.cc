// RecordIO files (see file.h).
#include "recordio/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tessera::recordio {
namespace {

std::string Where(const std::string& path, int index, int64_t offset) {
  return std::filesystem::path(path).filename().string() + " chunk " + std::to_string(index) + " at offset " +
         std::to_string(offset);
}

}  // namespace

StatusOr<std::unique_ptr<ChunkFile>> ChunkFile::Create(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Unavailable("cannot create '" + path + "': " + std::strerror(errno));
  return std::unique_ptr<ChunkFile>(new ChunkFile(path, fd));
}

ChunkFile::~ChunkFile() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<int64_t> ChunkFile::Append(std::string_view encoded) {
  int64_t at = size_;
  const char* p = encoded.data();
  size_t left = encoded.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Unavailable("write to '" + path_ + "' failed: " + std::strerror(errno));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  size_ += static_cast<int64_t>(encoded.size());
  return at;
}

Status ChunkFile::Close() {
  if (fd_ < 0) return Status::OK();
  int rc = ::fsync(fd_);
  int err = errno;
  ::close(fd_);
  fd_ = -1;
  if (rc != 0) return Status::DataLoss("fsync '" + path_ + "' failed: " + std::strerror(err));
  return Status::OK();
}

StatusOr<std::unique_ptr<FileReader>> FileReader::Open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::NotFound("cannot open '" + path + "': " + std::strerror(errno));
  return std::unique_ptr<FileReader>(new FileReader(path, f));
}

FileReader::~FileReader() {
  if (f_) std::fclose(f_);
}

StatusOr<bool> FileReader::Next(std::vector<std::string_view>* records) {
  char hdr[kHeaderSize];
  size_t got = std::fread(hdr, 1, kHeaderSize, f_);
  if (got == 0 && std::feof(f_)) return false;
  ++index_;
  std::string where = Where(path_, index_, offset_);
  TESSERA_ASSIGN_OR_RETURN(ChunkHeader h, DecodeHeader(std::string_view(hdr, got), where));
  stored_.resize(h.stored_size);
  size_t body = std::fread(stored_.data(), 1, h.stored_size, f_);
  TESSERA_RETURN_IF_ERROR(DecodeBody(h, std::string_view(stored_.data(), body), where, &scratch_, records));
  offset_ += static_cast<int64_t>(kHeaderSize + h.stored_size);
  return true;
}

Status ReadChunkAt(const std::string& path, int64_t offset, const ChunkInfo* expect, const std::string& name,
                   std::string* stored, std::string* scratch, std::vector<std::string_view>* records) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound(name + ": cannot open '" + path + "': " + std::strerror(errno));
  char hdr[kHeaderSize];
  ssize_t got = ::pread(fd, hdr, kHeaderSize, offset);
  if (got < 0) {
    int err = errno;
    ::close(fd);
    return Status::DataLoss(name + ": read error: " + std::strerror(err));
  }
  auto h = DecodeHeader(std::string_view(hdr, static_cast<size_t>(got)), name);
  if (!h.ok()) {
    ::close(fd);
    return h.status();
  }
  if (expect && (expect->records != h->records || expect->crc != h->crc ||
                 expect->bytes != kHeaderSize + h->stored_size)) {
    ::close(fd);
    return Status::DataLoss(name + ": chunk does not match the manifest (records, size or checksum differ)");
  }
  stored->resize(h->stored_size);
  size_t have = 0;
  while (have < h->stored_size) {
    ssize_t n = ::pread(fd, stored->data() + have, h->stored_size - have,
                        offset + static_cast<int64_t>(kHeaderSize + have));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    have += static_cast<size_t>(n);
  }
  ::close(fd);
  return DecodeBody(*h, std::string_view(stored->data(), have), name, scratch, records);
}

}  // namespace tessera::recordio
