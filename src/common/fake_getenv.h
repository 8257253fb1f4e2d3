// FakeGetenv: a getenv over a fixed set of variables, for tests of code that reads the
// environment through a function (math_threads.h, busy_poll.h, launch/plan.h).
#pragma once

#include <functional>
#include <map>
#include <string>

namespace tessera {

inline std::function<const char*(const char*)> FakeGetenv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace tessera
