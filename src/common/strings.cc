// String helpers (see strings.h).
#include "common/strings.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace tessera {

std::vector<std::string> Split(std::string_view s, char sep, bool skip_empty) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    std::string_view part = s.substr(start, end - start);
    if (!(skip_empty && part.empty())) out.emplace_back(part);
    start = end + 1;
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r' || s[b] == '\n')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r' || s[e - 1] == '\n')) --e;
  return s.substr(b, e - b);
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.substr(0, prefix.size()) == prefix;
}

StatusOr<int64_t> ParseInt64(std::string_view s, std::string_view what) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
    return Status::InvalidArgument(std::string(what) + ": '" + std::string(s) + "' is not an integer");
  }
  return v;
}

StatusOr<uint64_t> ParseUint64(std::string_view s, std::string_view what) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
    return Status::InvalidArgument(std::string(what) + ": '" + std::string(s) +
                                   "' is not a non-negative integer");
  }
  return v;
}

StatusOr<double> ParseDouble(std::string_view s, std::string_view what) {
  std::string str(s);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(str.c_str(), &end);
  if (str.empty() || errno != 0 || end != str.c_str() + str.size()) {
    return Status::InvalidArgument(std::string(what) + ": '" + str + "' is not a number");
  }
  return v;
}

StatusOr<HostPort> ParseHostPort(std::string_view s) {
  size_t colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == s.size()) {
    return Status::InvalidArgument("'" + std::string(s) + "' is not of the form host:port");
  }
  auto port = ParseInt64(s.substr(colon + 1), "port");
  if (!port.ok() || *port < 1 || *port > 65535) {
    return Status::InvalidArgument("'" + std::string(s) + "': port must be 1..65535");
  }
  return HostPort{std::string(s.substr(0, colon)), static_cast<int>(*port)};
}

StatusOr<std::vector<std::string>> ParseEndpoints(std::string_view s) {
  std::vector<std::string> out;
  for (const auto& part : Split(s, ',')) {
    std::string_view p = Trim(part);
    if (StartsWith(p, "http://")) p.remove_prefix(7);
    if (StartsWith(p, "https://")) p.remove_prefix(8);
    TESSERA_ASSIGN_OR_RETURN(HostPort hp, ParseHostPort(p));
    out.push_back(hp.ToString());
  }
  if (out.empty())
    return Status::InvalidArgument("no etcd endpoint given (expected host:port[,host:port...])");
  return out;
}

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f %s", bytes, units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", bytes, units[u]);
  return buf;
}

Status ValidateName(std::string_view name, std::string_view what) {
  if (name.empty() || name.size() > 64) {
    return Status::InvalidArgument(std::string(what) + " name must be 1..64 characters");
  }
  if (name[0] == '.') return Status::InvalidArgument(std::string(what) + " name may not start with '.'");
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.';
    if (!ok) {
      return Status::InvalidArgument(std::string(what) + " name '" + std::string(name) +
                                     "' may only contain letters, digits, '_', '-' and '.'");
    }
  }
  return Status::OK();
}

namespace {

// Optimal string alignment distance: Levenshtein plus swapping two neighbours.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string ClosestName(std::string_view typed, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::min<size_t>(2, std::max<size_t>(1, typed.size() / 3)) + 1;
  for (const auto& c : candidates) {
    size_t dist = EditDistance(typed, c);
    if (dist < best_distance) {
      best = c;
      best_distance = dist;
    }
  }
  return best;
}

std::string ClosestFlag(std::string_view typed, const std::vector<std::string>& flags) {
  if (std::string typo = ClosestName(typed, flags); !typo.empty()) return typo;
  std::string longer_words;
  for (const auto& f : flags) {
    if (typed.size() > f.size() + 1 && typed.substr(0, f.size()) == f && typed[f.size()] == '-' &&
        f.size() > longer_words.size())
      longer_words = f;
  }
  if (!longer_words.empty()) return longer_words;
  std::string started;
  int starting = 0;
  if (typed.size() >= 6) {  // "--" and 4 letters
    for (const auto& f : flags) {
      if (f.size() > typed.size() && std::string_view(f).substr(0, typed.size()) == typed) {
        started = f;
        ++starting;
      }
    }
  }
  return starting == 1 ? started : "";
}

std::string ShellQuote(std::string_view s) {
  bool safe = !s.empty();
  for (char c : s) {
    safe = safe && (std::isalnum(static_cast<unsigned char>(c)) ||
                    std::string_view("_@%+=:,./-").find(c) != std::string_view::npos);
  }
  if (safe) return std::string(s);
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string HexEncode(const void* data, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHex[p[i] >> 4];
    out[2 * i + 1] = kHex[p[i] & 15];
  }
  return out;
}

}  // namespace tessera
