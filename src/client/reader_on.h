// OpenReaderOn: a Reader on its trainer's etcd connection. A trainer (api::Session, scale_sim's
// simulated trainers) has already connected to etcd and read the job; its reader uses that
// connection and what was read instead of connecting again, which spares each trainer an etcd
// connection and two reads of the job (at 1,000 trainers, 1,000 connections etcd serves fewer).
// The reader keeps a master client of its own: a MasterClient serializes its calls, and the
// reader's task calls must not wait behind the trainer's progress reports (nor they behind it).
// Reader::Open still connects on its own.
#pragma once

#include <memory>

#include "client/job_connection.h"
#include "tessera/reader.h"

namespace tessera {

// `etcd` outlives the reader; the rest is copied.
struct TrainerConnection {
  etcd::EtcdClient* etcd = nullptr;
  JobConfig config;
  security::JobSecret secret;
  std::shared_ptr<const security::TlsConfig> tls;
};

StatusOr<std::unique_ptr<Reader>> OpenReaderOn(const ReaderOptions& options,
                                               const TrainerConnection& trainer);

}  // namespace tessera
