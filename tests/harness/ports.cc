// ConnectionsTo (see ports.h).
#include "harness/ports.h"

#include <fstream>
#include <sstream>
#include <string>

namespace tessera::testing {

int ConnectionsTo(int port) {
  int n = 0;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    // Bounded by the table's lines.
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const size_t colon = local.rfind(':');
      if (state != "01" || colon == std::string::npos) continue;  // 01: established
      if (std::stoi(local.substr(colon + 1), nullptr, 16) == port) ++n;
    }
  }
  return n;
}

}  // namespace tessera::testing
