// The JobService edge's side of jobs (docs/design/jobs.md): every request
// field validated with its reason before anything is written, and a job's
// record turned into its wire form. Used by job_service.cc.
#ifndef HUB_HUB_SERVICES_JOB_MAPPING_H_
#define HUB_HUB_SERVICES_JOB_MAPPING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "hub/v1/job.pb.h"
#include "records/job.h"
#include "storage/job_store.h"

namespace hub {

// The bounds job.proto names.
namespace job_limits {
inline constexpr size_t kMaxTaskBytes = 20'000;
inline constexpr size_t kMaxPayloadBytes = 256 * 1024;
inline constexpr size_t kMaxProgressBytes = 64 * 1024;
inline constexpr size_t kMaxWordBytes = 128;
inline constexpr int kMaxDependencies = 64;
inline constexpr int kMaxCapabilities = 32;
inline constexpr int kMaxNonRetryable = 16;
inline constexpr int64_t kMinTimeoutMs = 1000;
inline constexpr int64_t kMaxTimeoutMs = 24 * 3600 * 1000;
}  // namespace job_limits

// INVALID_ARGUMENT / JOB_FIELD_INVALID, metadata field.
absl::Status InvalidJobField(absl::string_view field,
                             absl::string_view message);
// PROJECT_ID_INVALID, AGENT_ID_INVALID, JOB_ID_INVALID (metadata field).
absl::Status ValidateJobProject(absl::string_view project_id);
absl::Status ValidateJobAgent(absl::string_view agent_id,
                              absl::string_view field);
absl::Status ValidateJobIdField(absl::string_view id, absl::string_view field);
// JOB_FIELD_INVALID for text longer than `max` bytes.
absl::Status ValidateJobText(absl::string_view value, absl::string_view field,
                             size_t max = job_limits::kMaxWordBytes);
// A Struct field as JSON text ("{}" when unset) of at most `max` bytes.
absl::StatusOr<std::string> JobStructField(
    bool has, const google::protobuf::Struct& value, absl::string_view field,
    size_t max);
// A Timestamp between 1970 and 9999.
absl::Status CheckJobTimestamp(const google::protobuf::Timestamp& t,
                               absl::string_view field);

// CreateJob's request as the job to store (id and times left to JobBook).
absl::StatusOr<JobRecord> JobFromCreate(const hub::v1::CreateJobRequest& r);
// A JobAttempt as the fence of an attempt write.
absl::StatusOr<JobAttemptFence> JobFenceOf(const hub::v1::JobAttempt& a);
// The state a JobState number names, nullopt for UNSPECIFIED or unknown.
std::optional<JobState> JobStateOfProto(int state);
// ListJobs' page token after `last`, and back.
std::string JobPageToken(const JobRecord& last);
absl::Status ParseJobPageToken(const std::string& token,
                               storage::JobFilter* filter);

// The wire form of a job.
absl::StatusOr<hub::v1::Job> JobToProto(const JobRecord& job);

}  // namespace hub

#endif  // HUB_HUB_SERVICES_JOB_MAPPING_H_
