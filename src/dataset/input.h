// InputFile: reads a file, gzip-compressed or not (detected from its first bytes), or standard
// input ("-"), with line reading and progress in bytes of the underlying file. Used by the
// importers. Not thread-safe (one owner).
#pragma once

#include <zlib.h>

#include <memory>
#include <string>

#include "tessera/status.h"

namespace tessera::dataset {

class InputFile {
 public:
  static StatusOr<std::unique_ptr<InputFile>> Open(const std::string& path);
  ~InputFile();
  // Reads exactly n bytes; DataLoss "truncated" if the input ends first.
  Status ReadExact(void* out, size_t n, const std::string& what);
  // Reads the next line without its '\n'; returns false at the end of the input.
  StatusOr<bool> ReadLine(std::string* line);
  // Bytes of the (possibly compressed) file consumed so far, and its total size (0: unknown).
  int64_t position() const;
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  InputFile() = default;
  Status Fill();
  std::string path_;
  gzFile gz_ = nullptr;
  int64_t size_ = 0;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
};

}  // namespace tessera::dataset
