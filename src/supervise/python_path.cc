// PythonPathBeside (see python_path.h).
#include "supervise/python_path.h"

#include <cstdlib>
#include <filesystem>

namespace tessera::supervise {

namespace fs = std::filesystem;

std::map<std::string, std::string> PythonPathBeside(const std::string& tessera_bin) {
  fs::path bin = fs::path(tessera_bin).parent_path();
  for (const fs::path& dir : {bin / "../python", bin / "../lib/tessera/python"}) {
    std::error_code ec;
    if (!fs::exists(dir / "tessera" / "__init__.py", ec)) continue;
    const char* old = std::getenv("PYTHONPATH");
    return {
        {"PYTHONPATH", fs::weakly_canonical(dir, ec).string() + (old && *old ? std::string(":") + old : "")}};
  }
  return {};
}

}  // namespace tessera::supervise
