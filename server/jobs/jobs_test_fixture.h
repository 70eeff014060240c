// A JobService + LeaseService over a fresh database of one backend, with a
// FakeClock, for the job logic suites (run against every backend).
#ifndef QUANTD_SERVER_JOBS_JOBS_TEST_FIXTURE_H_
#define QUANTD_SERVER_JOBS_JOBS_TEST_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "server/common/clock.h"
#include "server/common/errors.h"
#include "server/common/json_log.h"
#include "server/jobs/caller.h"
#include "server/jobs/change_notifier.h"
#include "server/jobs/job_service.h"
#include "server/jobs/jobs_options.h"
#include "server/jobs/lease_reaper.h"
#include "server/jobs/lease_service.h"
#include "server/store/testing/test_database.h"
#include "worker/common/status.h"

namespace quantd::server::testing {

class JobsTest : public ::testing::TestWithParam<TestBackend> {
 protected:
  void SetUp() override {
    SetMinLogLevel(LogLevel::kError);  // keep test logs readable
    options_.data_dir = "/srv/quantd";
    options_.lease_duration = absl::Seconds(3);
    options_.requeue_backoff = absl::Seconds(1);
    options_.max_requeue_backoff = absl::Seconds(4);
    options_.poll_interval = absl::Milliseconds(50);
    db_ = GetParam().create();
    Restart();
  }

  // Rebuilds the store connection and services on the same database, as a
  // quantd restart would (the clock keeps its time).
  void Restart() {
    jobs_.reset();
    leases_.reset();
    store_.reset();
    notifier_ = std::make_unique<ChangeNotifier>();
    auto store = db_->Open();
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    jobs_ = std::make_unique<JobService>(store_.get(), &clock_, notifier_.get(), nullptr, options_);
    leases_ =
        std::make_unique<LeaseService>(store_.get(), &clock_, notifier_.get(), nullptr, options_);
  }

  static v1::CreateJobRequest Request(const std::string& model = "file:///models/stories260K",
                                      const std::string& request_id = "") {
    v1::CreateJobRequest request;
    request.set_request_id(request_id);
    request.mutable_spec()->set_model_uri(model);
    request.mutable_spec()->mutable_quantization()->set_scheme("w_int4_per_group_sym");
    return request;
  }

  v1::Job Create(const std::string& model = "file:///models/stories260K",
                 const Caller& caller = Caller::Anonymous()) {
    auto job = jobs_->CreateJob(caller, Request(model));
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : v1::Job();
  }

  static v1::LeaseJobRequest LeaseRequest(const std::string& worker = "w1",
                                          const std::string& device = "cpu") {
    v1::LeaseJobRequest request;
    request.mutable_worker()->set_id(worker);
    request.mutable_worker()->set_device(device);
    return request;
  }

  // A worker credential of its own (leases are bound to the identity).
  static Caller WorkerCredential(const std::string& name) {
    return Caller{"", Role::kWorker, "sha256:" + name};
  }

  // Leases a job; fails the test when none is available.
  v1::LeaseJobResponse Lease(const std::string& worker = "w1", const std::string& device = "cpu",
                             const Caller& caller = Caller::Anonymous()) {
    auto response = leases_->LeaseJob(caller, LeaseRequest(worker, device));
    EXPECT_TRUE(response.ok()) << response.status();
    EXPECT_TRUE(response.ok() && response->has_job()) << "no job to lease";
    return response.ok() ? *response : v1::LeaseJobResponse();
  }

  v1::Job Get(const std::string& name) {
    v1::GetJobRequest request;
    request.set_name(name);
    auto job = jobs_->GetJob(Caller::Anonymous(), request);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : v1::Job();
  }

  std::vector<v1::JobEvent> Events(const std::string& name, int64_t after = 0) {
    auto events = store_->ListEvents(name, after, 10000);
    EXPECT_TRUE(events.ok()) << events.status();
    return events.ok() ? *events : std::vector<v1::JobEvent>();
  }

  quantd::Status Heartbeat(const v1::Lease& lease, const Caller& caller = Caller::Anonymous()) {
    v1::HeartbeatRequest request;
    *request.mutable_lease() = lease;
    return leases_->Heartbeat(caller, request).status();
  }

  FakeClock clock_;
  JobsOptions options_;
  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<ChangeNotifier> notifier_;
  std::unique_ptr<JobService> jobs_;
  std::unique_ptr<LeaseService> leases_;
};

inline std::string BackendName(const ::testing::TestParamInfo<TestBackend>& info) {
  return info.param.name;
}

}  // namespace quantd::server::testing

#endif  // QUANTD_SERVER_JOBS_JOBS_TEST_FIXTURE_H_
