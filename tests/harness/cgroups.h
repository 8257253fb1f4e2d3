// Whether this test process may make control groups (root, a writable hierarchy), and run the
// platform's sandboxes (that, and bubblewrap): tests of what needs them skip, saying why, elsewhere.
// Test-only.
#pragma once

#include <unistd.h>

#include <string>

#include "common/cgroup.h"

namespace tessera::testing {

// "" when control groups can be made here, else why not.
inline std::string CgroupsUnavailable() {
  auto g = Cgroup::Create(CgroupLayout::Detect(), "tessera-test-probe-" + std::to_string(::getpid()), true);
  if (!g.ok()) return std::string(g.status().message());
  (void)(*g)->Remove();
  return "";
}

// "" when the platform's sandboxes can run here, else why not.
inline std::string SandboxesUnavailable() {
  if (::geteuid() != 0) return "sandboxes need root";
  if (::access("/usr/bin/bwrap", X_OK) != 0) return "bubblewrap is not installed";
  return CgroupsUnavailable();
}

}  // namespace tessera::testing
