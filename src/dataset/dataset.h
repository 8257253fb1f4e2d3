// Data sets in a store: a store is a POSIX directory (local disk or a shared mount); a data set
// is <store>/<name>/ with part-NNNNN.rio files and manifest.json.
//
// DatasetWriter writes a new data set atomically: everything goes into a hidden temporary
// directory <store>/.tmp-<name>-<id>/, the manifest is written last, files and directories are
// fsynced, and only then is the directory renamed to <store>/<name>. A crash leaves at most a
// hidden .tmp directory, never a half data set that looks whole. Chunks are spread round-robin
// over the parts, and the manifest keeps them in writing order.
//
// DatasetReader opens a data set by its manifest and reads chunks, checking each against the
// manifest and its own checksums. Neither is thread-safe (one owner each).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dataset/manifest.h"
#include "recordio/file.h"
#include "tessera/status.h"

namespace tessera::dataset {

struct WriterOptions {
  int parts = 1;  // part files to spread chunks over
  recordio::Compressor compressor = recordio::Compressor::kZstd;
  size_t chunk_bytes = 1 << 20;  // target raw bytes per chunk
  bool force = false;            // replace an existing data set
  // Add records to an existing data set (same format) instead: they go into new part files
  // (hidden until complete), then one atomic replacement of the manifest lists the old chunks
  // and the new ones. Readers holding the old manifest read on undisturbed; a crash leaves the
  // data set as it was. Appends to one data set are serialized by a lock file.
  bool append = false;
};

class DatasetWriter {
 public:
  // Fails (AlreadyExists) if the data set exists and !force; InvalidArgument for a bad name.
  static StatusOr<std::unique_ptr<DatasetWriter>> Create(const std::string& store, const std::string& name,
                                                         const std::string& format,
                                                         const std::string& record_type,
                                                         WriterOptions options);
  ~DatasetWriter();  // without Commit(), removes the temporary directory

  Status Add(std::string_view record);
  int64_t records() const { return records_; }
  int64_t bytes_written() const { return bytes_; }
  // Writes the manifest (with `meta`), fsyncs, and moves the data set into place.
  Status Commit(const nlohmann::json& meta);

 private:
  DatasetWriter() = default;
  Status FlushChunk();

  Status OpenParts(const std::vector<std::string>& paths);  // the part files and the chunk builder
  Status OpenForAppend();
  Status CommitAppend(const nlohmann::json& meta);

  std::string store_, name_, tmp_;      // tmp_: a new data set's hidden directory
  Manifest old_;                        // append: the manifest appended to
  std::vector<std::string> tmp_parts_;  // append: the new parts' hidden names
  int lock_fd_ = -1;                    // append: the data set's append lock
  WriterOptions options_;
  Manifest manifest_;
  std::vector<std::unique_ptr<recordio::ChunkFile>> files_;
  std::unique_ptr<recordio::ChunkBuilder> builder_;
  std::string encoded_;
  int64_t records_ = 0;
  int64_t bytes_ = 0;
  bool committed_ = false;
};

class DatasetReader {
 public:
  static StatusOr<std::unique_ptr<DatasetReader>> Open(const std::string& store, const std::string& name);
  const Manifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  // Reads chunk `index` (manifest order), checked; records are views valid until the next call.
  Status ReadChunk(size_t index, std::vector<std::string_view>* records);

 private:
  DatasetReader() = default;
  std::string dir_;
  Manifest manifest_;
  std::string stored_, scratch_;
};

// Reads and validates <dir>/manifest.json.
StatusOr<Manifest> LoadManifest(const std::string& dir);

// The manifest of data set `name` in `store`, with an error a person can act on: NotFound naming
// the store when it is not a directory, or the data sets it holds when `name` is not one of them.
StatusOr<Manifest> FindDataset(const std::string& store, const std::string& name);

// The data sets in a store (directories with a manifest), sorted by name.
StatusOr<std::vector<Manifest>> ListDatasets(const std::string& store, int* unfinished = nullptr);

}  // namespace tessera::dataset
