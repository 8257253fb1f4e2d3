// BuildPath (see subprocess.h).
#include <cstdlib>

#include "harness/subprocess.h"

namespace tessera::testing {

std::string BuildPath(const std::string& relative) {
  const char* dir = std::getenv("TESSERA_BUILD_DIR");
  return std::string(dir && *dir ? dir : ".") + "/" + relative;
}

}  // namespace tessera::testing
