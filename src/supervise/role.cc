// RoleName (see role.h).
#include "supervise/role.h"

namespace tessera::supervise {

const char* RoleName(Role r) {
  switch (r) {
    case Role::kEtcd:
      return "etcd";
    case Role::kMaster:
      return "master";
    case Role::kPserver:
      return "pserver";
    case Role::kTrainer:
      return "trainer";
  }
  return "?";
}

}  // namespace tessera::supervise
