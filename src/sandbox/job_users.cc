// Job users (see job_users.h).
#include "sandbox/job_users.h"

#include <charconv>

namespace tessera::sandbox {
namespace {

bool ParseU32(std::string_view s, uint32_t* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

StatusOr<UidRange> ParseUidRange(std::string_view text) {
  const size_t dash = text.find('-');
  UidRange r;
  if (dash == std::string_view::npos || !ParseU32(text.substr(0, dash), &r.first) ||
      !ParseU32(text.substr(dash + 1), &r.last))
    return Status::InvalidArgument("job user ids '" + std::string(text) +
                                   "' are not a range FIRST-LAST (for example 61000000-61099999)");
  if (r.last < r.first)
    return Status::InvalidArgument("job user ids " + std::string(text) +
                                   ": the range is empty (LAST < FIRST)");
  if (r.first < 1000)
    return Status::InvalidArgument("job user ids " + std::string(text) +
                                   " start below 1000, among the system's and people's own users");
  if (r.last >= 4294967295u)
    return Status::InvalidArgument("job user ids " + std::string(text) +
                                   " hold 4294967295, which means 'no user'");
  if (r.first <= 65534 && 65534 <= r.last)
    return Status::InvalidArgument("job user ids " + std::string(text) + " hold 65534 (nobody)");
  return r;
}

StatusOr<uint32_t> PickUid(const UidRange& range, const std::set<uint32_t>& taken,
                           const std::function<bool(uint32_t)>& known) {
  for (uint64_t uid = range.first; uid <= range.last; ++uid) {
    const auto u = static_cast<uint32_t>(uid);
    if (taken.count(u) || known(u)) continue;
    return u;
  }
  return Status::ResourceExhausted("every job user id of " + std::to_string(range.first) + "-" +
                                   std::to_string(range.last) +
                                   " is taken (one per namespace): give the server a wider --job-uids");
}

std::string JobUserName(const std::string& ns) { return "tessera-" + ns; }

std::string PasswdText(const std::string& ns, uint32_t uid, const std::string& home) {
  return "root:x:0:0:root:/root:/usr/sbin/nologin\n" + JobUserName(ns) + ":x:" + std::to_string(uid) + ":" +
         std::to_string(uid) + ":Tessera jobs of " + ns + ":" + home + ":/bin/sh\n" +
         "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
}

std::string GroupText(const std::string& ns, uint32_t gid) {
  return "root:x:0:\n" + JobUserName(ns) + ":x:" + std::to_string(gid) + ":\nnogroup:x:65534:\n";
}

}  // namespace tessera::sandbox
