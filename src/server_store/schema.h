// The platform server's schema: every table, as the ordered migrations Migrate() applies
// (database.h). A new table or column is a new migration at the end; a released one never changes.
#pragma once

#include <vector>

#include "server_store/database.h"

namespace tessera::server {

const std::vector<Migration>& ServerSchema();

}  // namespace tessera::server
