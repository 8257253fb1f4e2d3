// Authorization: what a role in a namespace may do, as one table. Pure; thread-safe.
//   viewer  reads: the namespace, its jobs, their logs and metrics, its data sets, its quota
//   member  and acts: submits, stops, scales and deletes jobs; uploads and deletes data sets
//   admin   and governs: shares data sets with other namespaces, manages members, reads the audit
// Setting a namespace's quota is for server administrators only, whatever their role in it.
// Server administrators may do everything everywhere.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera::server {

enum class NamespaceRole { kViewer, kMember, kAdmin };
const char* NamespaceRoleName(NamespaceRole r);
StatusOr<NamespaceRole> ParseNamespaceRole(const std::string& name);

enum class Action {
  kReadNamespace,
  kListJobs,
  kReadJob,
  kReadLogs,
  kSubmitJob,
  kStopJob,
  kScaleJob,
  kDeleteJob,
  kListDatasets,
  kReadDataset,
  kUploadDataset,
  kDeleteDataset,
  kShareDataset,
  kReadQuota,
  kSetQuota,
  kManageMembers,
  kReadAudit,
};
const char* ActionName(Action a);
const std::vector<Action>& AllActions();

// `role`: the user's role in the namespace (nullopt: none).
bool Allowed(std::optional<NamespaceRole> role, bool server_admin, Action action);

}  // namespace tessera::server
