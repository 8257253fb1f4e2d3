// LocalDataset (include/tessera/session.h): a data set read in full from the store, chunk by
// chunk, outside the task queue (a trainer's evaluation set).
#include "dataset/dataset.h"
#include "tessera/session.h"

namespace tessera::api {

struct LocalDataset::Impl {
  std::unique_ptr<dataset::DatasetReader> reader;
  std::vector<std::string_view> chunk;  // records of the chunk being read (views into the reader)
  size_t next_chunk = 0, next_record = 0;
};

LocalDataset::LocalDataset(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LocalDataset::~LocalDataset() = default;

StatusOr<std::unique_ptr<LocalDataset>> LocalDataset::Open(const std::string& store,
                                                           const std::string& name) {
  if (store.empty()) {
    return Status::InvalidArgument("reading data set '" + name +
                                   "' needs the store: pass store= or set TESSERA_STORE");
  }
  auto impl = std::make_unique<Impl>();
  TESSERA_ASSIGN_OR_RETURN(impl->reader, dataset::DatasetReader::Open(store, name));
  return std::unique_ptr<LocalDataset>(new LocalDataset(std::move(impl)));
}

StatusOr<bool> LocalDataset::Next(std::string* record) {
  Impl& d = *impl_;
  while (d.next_record >= d.chunk.size()) {
    if (d.next_chunk >= d.reader->manifest().chunks.size()) return false;
    TESSERA_RETURN_IF_ERROR(d.reader->ReadChunk(d.next_chunk++, &d.chunk));
    d.next_record = 0;
  }
  record->assign(d.chunk[d.next_record++]);
  return true;
}

void LocalDataset::Rewind() {
  impl_->chunk.clear();
  impl_->next_chunk = impl_->next_record = 0;
}

int64_t LocalDataset::records() const { return impl_->reader->manifest().records; }

}  // namespace tessera::api
