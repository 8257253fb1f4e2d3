// Uploading a data set to a tessera server: declare the upload (each file's size and SHA-256),
// send each file in chunks with their digests, finish, and wait for the server's import. An
// upload of the same name and the same files that an earlier run left unfinished is resumed
// from where the server has it; one with other files is refused with how to clear it. A dropped
// connection is retried (a bounded number of times) from the server's count of received bytes.
// One owner (not thread-safe); it stops at the next chunk once `cancel` is set.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>

#include "remote/api_client.h"

namespace tessera::remote {

struct DatasetUpload {
  std::string ns;
  std::string name;
  std::string format;                        // text, csv, libsvm, idx, list
  std::map<std::string, std::string> files;  // the format's file (input, images, labels, archive) -> path
  std::string label_column;                  // csv
  bool header = false;                       // csv
  std::string list;                          // list: the list file inside the archive
  int64_t chunk_bytes = 0;                   // 0: the server's chunk size
  double limit_bytes_per_s = 0;              // 0: as fast as the link allows
};

struct UploadEvents {
  std::function<void(const std::string& what)> note;          // "resuming upload ... at 40%"
  std::function<void(int64_t sent, int64_t total)> progress;  // bytes the server has
  std::function<void(const std::string& state)> importing;    // while the server imports
};

// Returns the data set as the server describes it once the import is done.
StatusOr<Json> UploadDataset(ApiClient& api, const DatasetUpload& up, const UploadEvents& events,
                             const std::atomic<bool>& cancel);

}  // namespace tessera::remote
