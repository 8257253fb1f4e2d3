// LoginThrottle: slows password guessing. A login names keys — the account ("user:ada") and the
// client's address ("addr:10.0.0.7") — and each key counts the failures in a row against it.
// The first `free_failures` cost nothing (a person mistyping); after that each failure makes the
// key wait twice as long as the last before its next try is even checked (1 s, 2 s, 4 s, ... up
// to `max_delay_ms`), and a try that comes early is refused without looking at the password, so
// it neither counts nor tells anything. A success clears the keys it named. A key forgets after
// `forget_after_ms` without failures; at most `max_keys` are kept (the stalest go first), so a
// flood of addresses cannot exhaust memory.
//
// Per account AND per address: an address trying many accounts is slowed as one trying one, and
// a guesser spread over many addresses is still slowed on the account it attacks (at the price
// that it can make the real owner wait too, for at most `max_delay_ms`; docs/security.md).
// Pure: times are passed in. Not thread-safe (the API guards it with a mutex).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessera::server {

struct LoginThrottleOptions {
  int free_failures = 5;
  int64_t first_delay_ms = 1000;
  int64_t max_delay_ms = 300000;      // 5 minutes
  int64_t forget_after_ms = 3600000;  // 1 hour
  size_t max_keys = 100000;
};

class LoginThrottle {
 public:
  explicit LoginThrottle(LoginThrottleOptions options = {}) : o_(options) {}

  // How long until a login naming `keys` may be checked (0: now).
  int64_t WaitMs(const std::vector<std::string>& keys, int64_t now_ms) const;
  // A checked login failed (a wrong name or password).
  void Failed(const std::vector<std::string>& keys, int64_t now_ms);
  // A checked login succeeded.
  void Succeeded(const std::vector<std::string>& keys);
  // Failures in a row against `key` (0 for one not kept).
  int Failures(const std::string& key) const;
  size_t size() const { return keys_.size(); }

 private:
  struct Entry {
    int failures = 0;
    int64_t last_ms = 0;     // the last failure
    int64_t allowed_ms = 0;  // no try before
  };
  int64_t Delay(int failures) const;
  LoginThrottleOptions o_;
  std::map<std::string, Entry> keys_;
};

}  // namespace tessera::server
