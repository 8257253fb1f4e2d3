// HttpAccessFor (see http_token.h).
#include "security/http_token.h"

namespace tessera::security {

StatusOr<std::shared_ptr<const HttpAccess>> HttpAccessFor(const std::string& bind_host,
                                                          const JobSecret& secret, const std::string& job) {
  if (IsLoopbackHost(bind_host)) return std::make_shared<const HttpAccess>("");
  if (secret.empty()) {
    return Status::FailedPrecondition(
        "--http-host " + bind_host + " is not a loopback address, and job '" + job +
        "' has no secret to make the console token from (create the job again)");
  }
  return std::make_shared<const HttpAccess>(secret.ConsoleToken());
}

}  // namespace tessera::security
