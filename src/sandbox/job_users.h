// Job users: the Unix users a platform's jobs run as. The server owns a range of user ids
// (`tessera server --job-uids FIRST-LAST`, default 61000000-61099999) and gives each namespace one
// of them, once, for good: every process of that namespace's jobs runs as it (with a group of the
// same number), so a job's files are its namespace's and no job ever holds the server's user or
// root. An id the host already knows (a user in /etc/passwd, or NSS) is never taken. Pure.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>

#include "tessera/status.h"

namespace tessera::sandbox {

struct UidRange {
  uint32_t first = 61000000;
  uint32_t last = 61099999;
};

// "FIRST-LAST". InvalidArgument, saying why, for a range that is malformed, empty, holds 0
// (root), 65534 (nobody) or 4294967295 (-1), or starts below 1000 (system and login users).
StatusOr<UidRange> ParseUidRange(std::string_view text);

// The lowest id of `range` not in `taken` and not known to the host (`known(uid)`, e.g. a
// getpwuid() that finds a user). ResourceExhausted when every id is used.
StatusOr<uint32_t> PickUid(const UidRange& range, const std::set<uint32_t>& taken,
                           const std::function<bool(uint32_t)>& known);

// The name the job's user has in its own /etc/passwd: "tessera-" and the namespace.
std::string JobUserName(const std::string& ns);
// Its /etc/passwd and /etc/group: root, the job's user (home HOME, no shell login) and nobody.
std::string PasswdText(const std::string& ns, uint32_t uid, const std::string& home);
std::string GroupText(const std::string& ns, uint32_t gid);

}  // namespace tessera::sandbox
