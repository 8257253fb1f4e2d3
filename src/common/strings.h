// Small string helpers: parsing numbers and host:port with clear errors, splitting, formatting
// sizes. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/status.h"

namespace tessera {

std::vector<std::string> Split(std::string_view s, char sep, bool skip_empty = true);
std::string_view Trim(std::string_view s);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
bool StartsWith(std::string_view s, std::string_view prefix);

// Parses a whole decimal integer; `what` names the value in the error message.
StatusOr<int64_t> ParseInt64(std::string_view s, std::string_view what);
StatusOr<uint64_t> ParseUint64(std::string_view s, std::string_view what);
StatusOr<double> ParseDouble(std::string_view s, std::string_view what);

struct HostPort {
  std::string host;
  int port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};
// Parses "host:port" (port 1..65535).
StatusOr<HostPort> ParseHostPort(std::string_view s);

// Parses a comma-separated list of host:port endpoints, e.g. "127.0.0.1:2379,10.0.0.2:2379".
StatusOr<std::vector<std::string>> ParseEndpoints(std::string_view s);

// Lowercase hex of `n` bytes (two characters each).
std::string HexEncode(const void* data, size_t n);

// "1.5 MiB", "312 B".
std::string HumanBytes(double bytes);

// Validates a job or data set name: 1..64 of [A-Za-z0-9_.-], not starting with '.'.
Status ValidateName(std::string_view name, std::string_view what);

// The candidate closest to `typed` by edit distance (insertions, deletions, substitutions and
// swaps of neighbours), if it is close enough to be a likely typo (at most a third of its
// length, and at most 2); "" if none is.
std::string ClosestName(std::string_view typed, const std::vector<std::string>& candidates);
// The flag `typed` (e.g. "--run-dir") most likely meant among `flags`: ClosestName's typo, else
// the longest flag that `typed` extends by more words ("--run" for "--run-dir"), else the one
// flag that starts with `typed` (at least 4 letters: "--pserv" for "--pservers"); "" if none.
std::string ClosestFlag(std::string_view typed, const std::vector<std::string>& flags);

// `s` as one word for a POSIX shell: unchanged when it is made of safe characters only
// ([A-Za-z0-9_@%+=:,./-]), otherwise in single quotes ('' for the empty string).
std::string ShellQuote(std::string_view s);

}  // namespace tessera
