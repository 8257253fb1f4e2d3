// The processes a Tessera job is made of, by role: what `tessera local` supervises on one machine
// and `tessera launch` starts on a cluster's hosts (one `tessera node` each).
#pragma once

namespace tessera::supervise {

enum class Role { kEtcd, kMaster, kPserver, kTrainer };
const char* RoleName(Role r);

}  // namespace tessera::supervise
