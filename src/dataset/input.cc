// InputFile (see input.h).
#include "dataset/input.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tessera::dataset {

StatusOr<std::unique_ptr<InputFile>> InputFile::Open(const std::string& path) {
  std::unique_ptr<InputFile> f(new InputFile());
  f->path_ = path;
  if (path == "-") {
    f->gz_ = gzdopen(::dup(0), "rb");
  } else {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return Status::NotFound("no such file '" + path + "'");
    f->size_ = static_cast<int64_t>(std::filesystem::file_size(path, ec));
    f->gz_ = gzopen(path.c_str(), "rb");
  }
  if (!f->gz_) return Status::Unavailable("cannot open '" + path + "': " + std::strerror(errno));
  gzbuffer(f->gz_, 1 << 17);
  return f;
}

InputFile::~InputFile() {
  if (gz_) gzclose(gz_);
}

int64_t InputFile::position() const { return gz_ ? static_cast<int64_t>(gzoffset(gz_)) : 0; }

Status InputFile::Fill() {
  if (eof_) return Status::OK();
  if (pos_ > 0) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  size_t old = buf_.size();
  buf_.resize(old + (1 << 16));
  int n = gzread(gz_, buf_.data() + old, 1 << 16);
  if (n < 0) {
    int err;
    const char* msg = gzerror(gz_, &err);
    buf_.resize(old);
    return Status::DataLoss("read error in '" + path_ + "': " + (msg ? msg : "unknown") +
                            " (a corrupt or truncated gzip file?)");
  }
  buf_.resize(old + static_cast<size_t>(n));
  if (n == 0) eof_ = true;
  return Status::OK();
}

Status InputFile::ReadExact(void* out, size_t n, const std::string& what) {
  char* dst = static_cast<char*>(out);
  while (n > 0) {
    if (pos_ == buf_.size()) {
      TESSERA_RETURN_IF_ERROR(Fill());
      if (pos_ == buf_.size())
        return Status::DataLoss("'" + path_ + "' is truncated: it ends inside " + what);
    }
    size_t take = std::min(n, buf_.size() - pos_);
    std::memcpy(dst, buf_.data() + pos_, take);
    dst += take;
    pos_ += take;
    n -= take;
  }
  return Status::OK();
}

StatusOr<bool> InputFile::ReadLine(std::string* line) {
  while (true) {
    size_t nl = buf_.find('\n', pos_);
    if (nl != std::string::npos) {
      line->assign(buf_, pos_, nl - pos_);
      pos_ = nl + 1;
      return true;
    }
    if (eof_) {
      if (pos_ == buf_.size()) return false;
      line->assign(buf_, pos_, std::string::npos);  // last line without a newline
      pos_ = buf_.size();
      return true;
    }
    TESSERA_RETURN_IF_ERROR(Fill());
  }
}

}  // namespace tessera::dataset
