// Uploads Fashion-MNIST from the Debian package (dataset-fashion-mnist) into a store as "fm"
// (training set) and, with `test_set`, "fm-test", by running `tessera upload`; and reads a data
// set's records into memory. Bench-only.
#pragma once

#include <string>
#include <vector>

#include "dataset/dataset.h"
#include "harness/subprocess.h"
#include "tessera/status.h"

namespace tessera::bench {

inline Status UploadFashionMnist(const std::string& store, const std::string& log_dir, bool test_set) {
  const std::string f = "/usr/share/datasets/fashion-mnist/";
  struct Set {
    const char *name, *images, *labels;
  };
  for (Set s : {Set{"fm", "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"},
                Set{"fm-test", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}}) {
    if (!test_set && std::string(s.name) == "fm-test") break;
    testing::SpawnOptions up;
    up.argv = {testing::BuildPath("src/tessera"),
               "upload",
               "--store",
               store,
               "--dataset",
               s.name,
               "--format",
               "idx",
               "--images",
               f + s.images,
               "--labels",
               f + s.labels};
    up.log_path = log_dir + "/upload-" + s.name + ".log";
    TESSERA_ASSIGN_OR_RETURN(auto p, testing::Subprocess::Spawn(up));
    auto code = p->Wait(std::chrono::minutes(2));
    if (!code || *code != 0)
      return Status::Internal("uploading " + std::string(s.name) + " failed: " + p->Output());
  }
  return Status::OK();
}

// Every record of data set `name` in `store`, in order (read before timing).
// The start of a `tessera local` command training on the uploaded "fm" in `store`, with its run
// directory at `run`; the caller adds the rest.
inline std::vector<std::string> LocalOnFashionMnist(const std::string& run, const std::string& store) {
  return {testing::BuildPath("src/tessera"), "local", "--run", run, "--store", store, "--dataset", "fm"};
}

inline StatusOr<std::vector<std::string>> ReadAllRecords(const std::string& store, const std::string& name) {
  TESSERA_ASSIGN_OR_RETURN(auto ds, dataset::DatasetReader::Open(store, name));
  std::vector<std::string> records;
  std::vector<std::string_view> chunk;
  for (size_t c = 0; c < ds->manifest().chunks.size(); ++c) {
    TESSERA_RETURN_IF_ERROR(ds->ReadChunk(c, &chunk));
    for (auto r : chunk) records.emplace_back(r);
  }
  return records;
}

}  // namespace tessera::bench
