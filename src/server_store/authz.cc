// The authorization table (see authz.h).
#include "server_store/authz.h"

namespace tessera::server {

const char* NamespaceRoleName(NamespaceRole r) {
  switch (r) {
    case NamespaceRole::kViewer:
      return "viewer";
    case NamespaceRole::kMember:
      return "member";
    case NamespaceRole::kAdmin:
      return "admin";
  }
  return "?";
}

StatusOr<NamespaceRole> ParseNamespaceRole(const std::string& name) {
  for (NamespaceRole r : {NamespaceRole::kViewer, NamespaceRole::kMember, NamespaceRole::kAdmin}) {
    if (name == NamespaceRoleName(r)) return r;
  }
  return Status::InvalidArgument("unknown role '" + name + "' (viewer, member or admin)");
}

const char* ActionName(Action a) {
  switch (a) {
    case Action::kReadNamespace:
      return "read namespace";
    case Action::kListJobs:
      return "list jobs";
    case Action::kReadJob:
      return "read job";
    case Action::kReadLogs:
      return "read logs";
    case Action::kSubmitJob:
      return "submit job";
    case Action::kStopJob:
      return "stop job";
    case Action::kScaleJob:
      return "scale job";
    case Action::kDeleteJob:
      return "delete job";
    case Action::kListDatasets:
      return "list data sets";
    case Action::kReadDataset:
      return "read data set";
    case Action::kUploadDataset:
      return "upload data set";
    case Action::kDeleteDataset:
      return "delete data set";
    case Action::kShareDataset:
      return "share data set";
    case Action::kReadQuota:
      return "read quota";
    case Action::kSetQuota:
      return "set quota";
    case Action::kManageMembers:
      return "manage members";
    case Action::kReadAudit:
      return "read audit log";
  }
  return "?";
}

const std::vector<Action>& AllActions() {
  static const std::vector<Action> all = {
      Action::kReadNamespace, Action::kListJobs,    Action::kReadJob,       Action::kReadLogs,
      Action::kSubmitJob,     Action::kStopJob,     Action::kScaleJob,      Action::kDeleteJob,
      Action::kListDatasets,  Action::kReadDataset, Action::kUploadDataset, Action::kDeleteDataset,
      Action::kShareDataset,  Action::kReadQuota,   Action::kSetQuota,      Action::kManageMembers,
      Action::kReadAudit};
  return all;
}

namespace {

// The least role an action needs; nullopt: server administrators only.
std::optional<NamespaceRole> Needs(Action a) {
  switch (a) {
    case Action::kReadNamespace:
    case Action::kListJobs:
    case Action::kReadJob:
    case Action::kReadLogs:
    case Action::kListDatasets:
    case Action::kReadDataset:
    case Action::kReadQuota:
      return NamespaceRole::kViewer;
    case Action::kSubmitJob:
    case Action::kStopJob:
    case Action::kScaleJob:
    case Action::kDeleteJob:
    case Action::kUploadDataset:
    case Action::kDeleteDataset:
      return NamespaceRole::kMember;
    case Action::kShareDataset:
    case Action::kManageMembers:
    case Action::kReadAudit:
      return NamespaceRole::kAdmin;
    case Action::kSetQuota:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

bool Allowed(std::optional<NamespaceRole> role, bool server_admin, Action action) {
  if (server_admin) return true;
  auto need = Needs(action);
  return need && role && static_cast<int>(*role) >= static_cast<int>(*need);
}

}  // namespace tessera::server
