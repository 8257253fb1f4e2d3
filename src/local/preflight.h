// Checks of a `tessera local` request made before anything starts, so a mistake (a misspelt data
// set or store, an unknown model or model setting, a model that cannot train on the data, a
// number out of range) is refused at once with what is wrong and where, instead of surfacing as
// a crash loop of some child minutes later. Pure reads of the options, the store and the
// environment (TESSERA_BUSY_POLL_US, which the children would inherit); thread-safe.
#pragma once

#include "job/job_config.h"
#include "local/supervisor.h"
#include "tessera/status.h"

namespace tessera::local {

// Everything that can be checked without starting a process. InvalidArgument or NotFound naming
// the flag.
Status CheckLocalOptions(const LocalOptions& o);

// The job configuration `tessera local` creates for these options (not yet its token).
StatusOr<JobConfig> LocalJobConfig(const LocalOptions& o);

}  // namespace tessera::local
