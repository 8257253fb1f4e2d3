// Test names for tessera::Process (src/common/process.h), and where the build tree's binaries
// are. Test-only.
#pragma once

#include <string>

#include "common/process.h"

namespace tessera::testing {

using Subprocess = ::tessera::Process;
using SpawnOptions = ::tessera::ProcessOptions;

// The path of a binary built by this build tree (TESSERA_BUILD_DIR), e.g. "src/tessera".
std::string BuildPath(const std::string& relative);

}  // namespace tessera::testing
