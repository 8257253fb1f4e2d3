// Where a trainer's command finds the `tessera` Python module: the one built (or installed) beside
// the `tessera` program, for `tessera local`'s trainers and a launched node's.
#pragma once

#include <map>
#include <string>

namespace tessera::supervise {

// PYTHONPATH such that `import tessera` in a trainer's command finds the module built (or
// installed) beside `tessera_bin` (ahead of the caller's PYTHONPATH); empty when there is none.
std::map<std::string, std::string> PythonPathBeside(const std::string& tessera_bin);

}  // namespace tessera::supervise
