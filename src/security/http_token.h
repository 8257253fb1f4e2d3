// The access rule of a node's HTTP endpoints (common/http_access.h) for where they bind: open on
// loopback, else the job's console token. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "common/http_access.h"
#include "security/job_secret.h"
#include "tessera/status.h"

namespace tessera::security {

// FailedPrecondition off loopback for a job without a secret (nothing to make the token from).
StatusOr<std::shared_ptr<const HttpAccess>> HttpAccessFor(const std::string& bind_host,
                                                          const JobSecret& secret, const std::string& job);

}  // namespace tessera::security
