// RecordIO files: a sequence of chunks (chunk.h). ChunkBuilder groups records into chunks of a
// target raw size; ChunkFile appends encoded chunks to a file; FileReader streams a file chunk
// by chunk (memory bounded by one chunk); ReadChunkAt reads and checks one chunk at a known
// offset (how a trainer reads a task). Not thread-safe (one owner per object).
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "recordio/chunk.h"
#include "tessera/status.h"

namespace tessera::recordio {

// Where a chunk lives and what it holds (what a data set manifest records).
struct ChunkInfo {
  int part = 0;        // which part file
  int64_t offset = 0;  // byte offset of the chunk header in the file
  uint32_t records = 0;
  uint64_t bytes = 0;      // header + stored bytes
  uint64_t raw_bytes = 0;  // record section before compression
  uint32_t crc = 0;        // CRC32C of the stored bytes
};

class ChunkBuilder {
 public:
  ChunkBuilder(Compressor compressor, size_t target_raw_bytes)
      : compressor_(compressor), target_(target_raw_bytes) {}
  void Add(std::string_view record) {
    records_.emplace_back(record);
    raw_ += record.size() + 2;
  }
  bool full() const { return raw_ >= target_; }
  bool empty() const { return records_.empty(); }
  // Encodes the records gathered so far into *encoded and starts a new chunk.
  void Take(std::string* encoded, ChunkHeader* header) {
    encoded->clear();
    EncodeChunk(records_, compressor_, encoded, header);
    records_.clear();
    raw_ = 0;
  }

 private:
  Compressor compressor_;
  size_t target_;
  std::vector<std::string> records_;
  size_t raw_ = 0;
};

class ChunkFile {
 public:
  static StatusOr<std::unique_ptr<ChunkFile>> Create(const std::string& path);
  ~ChunkFile();
  // Appends one encoded chunk; returns the offset it was written at.
  StatusOr<int64_t> Append(std::string_view encoded);
  // Flushes, fsyncs and closes.
  Status Close();

 private:
  explicit ChunkFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
  int64_t size_ = 0;
};

class FileReader {
 public:
  static StatusOr<std::unique_ptr<FileReader>> Open(const std::string& path);
  ~FileReader();
  // Reads the next chunk; returns false at a clean end of file. Records are views valid until
  // the next call. DataLoss names the file, the chunk index and its offset.
  StatusOr<bool> Next(std::vector<std::string_view>* records);
  int chunk_index() const { return index_; }

 private:
  FileReader(std::string path, std::FILE* f) : path_(std::move(path)), f_(f) {}
  std::string path_;
  std::FILE* f_;
  int index_ = -1;
  int64_t offset_ = 0;
  std::string stored_, scratch_;
};

// Reads the chunk at `offset` of `path` and checks it (and, if `expect` is given, that it is the
// chunk the manifest describes). `name` identifies it in errors.
Status ReadChunkAt(const std::string& path, int64_t offset, const ChunkInfo* expect, const std::string& name,
                   std::string* stored, std::string* scratch, std::vector<std::string_view>* records);

}  // namespace tessera::recordio
