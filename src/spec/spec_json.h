// A job spec written back in its own format (the fields ParseJobSpec reads), as JSON: what a
// program that built or changed a spec hands to the next one (the platform writes the spec of a
// job it runs with `tessera local --spec`). ParseJobSpec(SpecJson(s)) gives `s` back for every
// field the format has. Pure.
#pragma once

#include <nlohmann/json.hpp>

#include "spec/job_spec.h"

namespace tessera::spec {

nlohmann::json SpecJson(const JobSpec& s);

}  // namespace tessera::spec
