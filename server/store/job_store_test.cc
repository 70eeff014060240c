// The JobStore contract, run against every backend in AllTestBackends().
#include "server/store/job_store.h"

#include <atomic>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "server/common/errors.h"
#include "server/store/record_columns.h"
#include "server/store/testing/test_database.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

using google::protobuf::util::MessageDifferencer;
using google::protobuf::util::TimeUtil;
using testing::TestBackend;
using testing::TestDatabase;

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);
// 32-byte digests as the lease logic writes them: arbitrary bytes.
const std::string kSecretHash = std::string("\x00\xff\x10secret", 9) + std::string(23, '\x7f');
const std::string kOutcomeHash = std::string(31, '\x01') + std::string(1, '\0');

v1::JobEvent StateEvent(v1::JobState state) {
  v1::JobEvent event;
  event.set_state(state);
  *event.mutable_time() = TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(kT0));
  return event;
}

v1::JobEvent LogEvent(const std::string& text) {
  v1::JobEvent event;
  event.mutable_log()->set_severity(v1::INFO);
  event.mutable_log()->set_message(text);
  return event;
}

JobRecord NewRecord(const std::string& id, absl::Time create_time, const std::string& tenant = "",
                    const std::string& request_id = "", const std::string& device = "") {
  JobRecord record;
  v1::Job& job = record.job;
  job.set_name("jobs/" + id);
  job.set_tenant(tenant);
  job.set_request_id(request_id);
  job.set_state(v1::QUEUED);
  job.mutable_spec()->set_model_uri("file:///models/" + id);
  job.mutable_spec()->set_device(device);
  *job.mutable_create_time() = TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(create_time));
  *job.mutable_update_time() = job.create_time();
  record.request_spec = SerializeDeterministic(job.spec());
  record.available_time = create_time;
  return record;
}

class JobStoreSuite : public ::testing::TestWithParam<TestBackend> {
 protected:
  void SetUp() override {
    db_ = GetParam().create();
    ASSERT_NE(db_, nullptr);
    auto store = db_->Open();
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  JobRecord Create(const JobRecord& record, std::vector<v1::JobEvent> events = {}) {
    if (events.empty()) events.push_back(StateEvent(v1::QUEUED));
    auto outcome = store_->CreateJob(record, events, {});
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_TRUE(outcome->created);
    return outcome->record;
  }

  std::vector<std::string> Names(const std::vector<JobRecord>& records) {
    std::vector<std::string> names;
    for (const auto& r : records) names.push_back(r.job.name());
    return names;
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<JobStore> store_;
};

TEST_P(JobStoreSuite, CreateThenGetReturnsEveryField) {
  JobRecord record = NewRecord("a1", kT0, "acme", "req-1", "cuda");
  (*record.job.mutable_spec()->mutable_labels())["team"] = "vision";
  record.job.mutable_spec()->mutable_quantization()->set_scheme("w_int4_per_group_sym");
  Create(record);

  auto got = store_->GetJob("jobs/a1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(MessageDifferencer::Equals(got->job, record.job)) << got->job.DebugString();
  EXPECT_EQ(got->request_spec, record.request_spec);
  EXPECT_EQ(got->available_time, kT0);
  EXPECT_EQ(got->lease_token, 0);
  EXPECT_EQ(got->lease_expire_time, absl::InfinitePast());
  EXPECT_EQ(got->last_sequence, 1);
  EXPECT_EQ(got->lease_secret_hash, "");
  EXPECT_EQ(got->lease_holder, "");
  EXPECT_EQ(got->outcome_hash, "");
}

TEST_P(JobStoreSuite, UnknownJobIsNotFoundWithReason) {
  auto got = store_->GetJob("jobs/missing");
  EXPECT_EQ(got.status().code(), quantd::StatusCode::kNotFound);
  EXPECT_EQ(got.status().reason(), "JOB_NOT_FOUND");
  auto updated =
      store_->UpdateJob("jobs/missing", [](JobRecord&, JobUpdate&) { return quantd::OkStatus(); });
  EXPECT_EQ(updated.status().code(), quantd::StatusCode::kNotFound);
}

TEST_P(JobStoreSuite, EventsAreNumberedFromOneAndResumable) {
  Create(NewRecord("e1", kT0), {StateEvent(v1::QUEUED), LogEvent("first")});
  Create(NewRecord("e2", kT0), {StateEvent(v1::QUEUED)});
  auto updated = store_->UpdateJob("jobs/e1", [](JobRecord& record, JobUpdate& update) {
    update.events.push_back(LogEvent("second"));
    update.events.push_back(LogEvent("third"));
    return quantd::OkStatus();
  });
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->last_sequence, 4);

  auto all = store_->ListEvents("jobs/e1", 0, 100);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ((*all)[i].sequence(), i + 1);
    EXPECT_EQ((*all)[i].job(), "jobs/e1");
  }
  EXPECT_EQ((*all)[0].state(), v1::QUEUED);
  EXPECT_EQ((*all)[3].log().message(), "third");

  auto resumed = store_->ListEvents("jobs/e1", 2, 100);
  ASSERT_TRUE(resumed.ok());
  ASSERT_EQ(resumed->size(), 2u);
  EXPECT_EQ((*resumed)[0].sequence(), 3);
  EXPECT_EQ((*resumed)[0].log().message(), "second");

  auto limited = store_->ListEvents("jobs/e1", 0, 3);
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->size(), 3u);

  auto other = store_->ListEvents("jobs/e2", 0, 100);
  ASSERT_TRUE(other.ok());
  ASSERT_EQ(other->size(), 1u);
  EXPECT_EQ((*other)[0].sequence(), 1);
  auto none = store_->ListEvents("jobs/none", 0, 100);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_P(JobStoreSuite, CreateIsIdempotentOnTenantAndRequestId) {
  JobRecord first = NewRecord("i1", kT0, "acme", "req-7");
  Create(first);

  JobRecord retry = NewRecord("i2", kT0 + absl::Seconds(1), "acme", "req-7");
  auto outcome = store_->CreateJob(retry, {StateEvent(v1::QUEUED)}, {});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->created);
  EXPECT_EQ(outcome->record.job.name(), "jobs/i1");
  EXPECT_EQ(outcome->record.request_spec, first.request_spec);
  EXPECT_EQ(store_->GetJob("jobs/i2").status().code(), quantd::StatusCode::kNotFound);

  // The key is per tenant, and an empty request_id is never a key.
  auto other_tenant = store_->CreateJob(NewRecord("i3", kT0, "globex", "req-7"), {}, {});
  ASSERT_TRUE(other_tenant.ok());
  EXPECT_TRUE(other_tenant->created);
  EXPECT_TRUE(store_->CreateJob(NewRecord("i4", kT0, "acme", ""), {}, {})->created);
  EXPECT_TRUE(store_->CreateJob(NewRecord("i5", kT0, "acme", ""), {}, {})->created);
  EXPECT_EQ(*store_->CountJobs(std::nullopt, v1::QUEUED), 4);
}

TEST_P(JobStoreSuite, ConcurrentCreatesWithSharedRequestIdsStoreOneJobEach) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 25;
  constexpr int kRequestIds = 5;
  std::vector<std::unique_ptr<JobStore>> stores;
  for (int t = 0; t < kThreads; ++t) {
    auto s = db_->Open();  // one connection per thread, as separate frontends would
    ASSERT_TRUE(s.ok()) << s.status();
    stores.push_back(std::move(*s));
  }
  std::atomic<int> created{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        std::string id = absl::StrCat("c", t, "-", i);
        auto outcome = stores[t]->CreateJob(
            NewRecord(id, kT0, "acme", absl::StrCat("req-", i % kRequestIds)), {}, {});
        if (!outcome.ok()) {
          ++failures;
        } else if (outcome->created) {
          ++created;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(created.load(), kRequestIds);
  EXPECT_EQ(*store_->CountJobs("acme", v1::QUEUED), kRequestIds);
}

TEST_P(JobStoreSuite, QueuedLimitPerTenant) {
  CreateJobOptions options;
  options.max_queued_per_tenant = 2;
  EXPECT_TRUE(store_->CreateJob(NewRecord("q1", kT0, "acme", "r1"), {}, options)->created);
  EXPECT_TRUE(store_->CreateJob(NewRecord("q2", kT0, "acme", "r2"), {}, options)->created);
  auto full = store_->CreateJob(NewRecord("q3", kT0, "acme", "r3"), {}, options);
  EXPECT_EQ(full.status().code(), quantd::StatusCode::kResourceExhausted);
  EXPECT_EQ(full.status().reason(), "QUEUE_FULL");
  // A retry of a stored job is still answered.
  auto retry = store_->CreateJob(NewRecord("q4", kT0, "acme", "r1"), {}, options);
  ASSERT_TRUE(retry.ok());
  EXPECT_FALSE(retry->created);
  EXPECT_EQ(retry->record.job.name(), "jobs/q1");
  // Other tenants have their own budget.
  EXPECT_TRUE(store_->CreateJob(NewRecord("q5", kT0, "globex", "r1"), {}, options)->created);
  // A job that leaves QUEUED frees a slot.
  ASSERT_TRUE(store_
                  ->UpdateJob("jobs/q1",
                              [](JobRecord& r, JobUpdate&) {
                                r.job.set_state(v1::RUNNING);
                                return quantd::OkStatus();
                              })
                  .ok());
  EXPECT_TRUE(store_->CreateJob(NewRecord("q6", kT0, "acme", "r6"), {}, options)->created);
}

TEST_P(JobStoreSuite, FailedMutationWritesNothing) {
  Create(NewRecord("m1", kT0));
  auto failed = store_->UpdateJob("jobs/m1", [](JobRecord& r, JobUpdate& update) {
    r.job.set_state(v1::RUNNING);
    update.events.push_back(StateEvent(v1::RUNNING));
    return MakeError(quantd::StatusCode::kFailedPrecondition, "STALE_LEASE", "no");
  });
  EXPECT_EQ(failed.status().code(), quantd::StatusCode::kFailedPrecondition);
  EXPECT_EQ(failed.status().reason(), "STALE_LEASE");
  EXPECT_EQ(store_->GetJob("jobs/m1")->job.state(), v1::QUEUED);
  EXPECT_EQ(store_->ListEvents("jobs/m1", 0, 10)->size(), 1u);

  auto skipped = store_->UpdateJob("jobs/m1", [](JobRecord& r, JobUpdate& update) {
    r.job.set_state(v1::FAILED);
    update.write = false;
    return quantd::OkStatus();
  });
  ASSERT_TRUE(skipped.ok());
  EXPECT_EQ(store_->GetJob("jobs/m1")->job.state(), v1::QUEUED);
}

TEST_P(JobStoreSuite, UpdateWritesRecordAndLeaseColumns) {
  Create(NewRecord("u1", kT0));
  const absl::Time expire = kT0 + absl::Seconds(60);
  auto updated = store_->UpdateJob("jobs/u1", [&](JobRecord& r, JobUpdate& update) {
    r.job.set_state(v1::RUNNING);
    r.job.set_attempt(1);
    r.job.set_worker("w1");
    r.lease_token = 1;
    r.lease_expire_time = expire;
    r.lease_secret_hash = kSecretHash;
    r.lease_holder = "sha256:worker-one";
    update.events.push_back(StateEvent(v1::RUNNING));
    return quantd::OkStatus();
  });
  ASSERT_TRUE(updated.ok()) << updated.status();
  auto got = store_->GetJob("jobs/u1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->job.state(), v1::RUNNING);
  EXPECT_EQ(got->job.worker(), "w1");
  EXPECT_EQ(got->lease_token, 1);
  EXPECT_EQ(got->lease_expire_time, expire);
  EXPECT_EQ(got->last_sequence, 2);
  // Binary digests (zero bytes and high bytes included) come back intact.
  EXPECT_EQ(got->lease_secret_hash, kSecretHash);
  EXPECT_EQ(got->lease_holder, "sha256:worker-one");
  EXPECT_EQ(got->outcome_hash, "");

  ASSERT_TRUE(store_
                  ->UpdateJob("jobs/u1",
                              [&](JobRecord& r, JobUpdate&) {
                                r.job.set_state(v1::SUCCEEDED);
                                r.outcome_hash = kOutcomeHash;
                                return quantd::OkStatus();
                              })
                  .ok());
  got = store_->GetJob("jobs/u1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->outcome_hash, kOutcomeHash);
  EXPECT_EQ(got->lease_secret_hash, kSecretHash);  // untouched fields stay
  // A claim reads and writes the same columns.
  JobRecord queued = NewRecord("u2", kT0);
  queued.lease_holder = "sha256:earlier";
  Create(queued);
  auto claimed = store_->ClaimQueuedJob({{""}, kT0}, [&](JobRecord& r, JobUpdate&) {
    EXPECT_EQ(r.lease_holder, "sha256:earlier");
    r.job.set_state(v1::RUNNING);
    r.lease_holder = "sha256:worker-two";
    r.lease_secret_hash = kOutcomeHash;
    return quantd::OkStatus();
  });
  ASSERT_TRUE(claimed.ok() && claimed->has_value()) << claimed.status();
  EXPECT_EQ(store_->GetJob("jobs/u2")->lease_holder, "sha256:worker-two");
  EXPECT_EQ(store_->GetJob("jobs/u2")->lease_secret_hash, kOutcomeHash);
}

TEST_P(JobStoreSuite, ClaimTakesOldestQueuedJobForTheDevice) {
  Create(NewRecord("d1", kT0, "", "", "cuda"));
  Create(NewRecord("d2", kT0 + absl::Seconds(1), "", "", ""));
  Create(NewRecord("d3", kT0 + absl::Seconds(2), "", "", "cpu"));
  JobRecord later = NewRecord("d4", kT0 + absl::Seconds(3), "", "", "cpu");
  later.available_time = kT0 + absl::Minutes(10);  // backing off
  Create(later);

  auto take_running = [](JobRecord& r, JobUpdate&) {
    r.job.set_state(v1::RUNNING);
    return quantd::OkStatus();
  };
  ClaimQuery cpu{{"", "cpu"}, kT0 + absl::Minutes(1)};
  auto first = store_->ClaimQueuedJob(cpu, take_running);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ((*first)->job.name(), "jobs/d2");
  EXPECT_EQ((*first)->job.state(), v1::RUNNING);
  auto second = store_->ClaimQueuedJob(cpu, take_running);
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*second)->job.name(), "jobs/d3");
  auto none = store_->ClaimQueuedJob(cpu, take_running);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());  // d4 is not available yet, d1 wants cuda

  auto gpu = store_->ClaimQueuedJob({{"", "cuda", "cuda:0"}, kT0 + absl::Minutes(1)}, take_running);
  ASSERT_TRUE(gpu.ok() && gpu->has_value());
  EXPECT_EQ((*gpu)->job.name(), "jobs/d1");

  auto after_backoff = store_->ClaimQueuedJob({{"", "cpu"}, kT0 + absl::Minutes(10)}, take_running);
  ASSERT_TRUE(after_backoff.ok() && after_backoff->has_value());
  EXPECT_EQ((*after_backoff)->job.name(), "jobs/d4");
}

TEST_P(JobStoreSuite, FailedClaimLeavesTheJobQueued) {
  Create(NewRecord("f1", kT0));
  auto failed = store_->ClaimQueuedJob({{""}, kT0}, [](JobRecord& r, JobUpdate&) {
    r.job.set_state(v1::RUNNING);
    return quantd::InternalError("boom");
  });
  EXPECT_EQ(failed.status().code(), quantd::StatusCode::kInternal);
  EXPECT_EQ(store_->GetJob("jobs/f1")->job.state(), v1::QUEUED);
}

TEST_P(JobStoreSuite, ConcurrentClaimsHandOutEachJobOnce) {
  constexpr int kJobs = 24;
  for (int i = 0; i < kJobs; ++i) {
    Create(NewRecord(absl::StrCat("k", i), kT0 + absl::Milliseconds(i)));
  }
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<JobStore>> stores;
  for (int t = 0; t < kThreads; ++t) stores.push_back(std::move(*db_->Open()));
  absl::Mutex mu;
  std::vector<std::string> claimed;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (true) {
        auto got =
            stores[t]->ClaimQueuedJob({{""}, kT0 + absl::Hours(1)}, [&](JobRecord& r, JobUpdate&) {
              r.job.set_state(v1::RUNNING);
              r.lease_token += 1;
              return quantd::OkStatus();
            });
        ASSERT_TRUE(got.ok()) << got.status();
        if (!got->has_value()) return;
        absl::MutexLock lock(&mu);
        claimed.push_back((*got)->job.name());
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::string> unique(claimed.begin(), claimed.end());
  EXPECT_EQ(claimed.size(), static_cast<size_t>(kJobs));
  EXPECT_EQ(unique.size(), static_cast<size_t>(kJobs));
  EXPECT_EQ(*store_->CountJobs(std::nullopt, v1::RUNNING), kJobs);
}

TEST_P(JobStoreSuite, ExpiredLeasesAreRunningOrCancellingPastExpiry) {
  auto lease = [](v1::JobState state, absl::Time expire) {
    return [state, expire](JobRecord& r, JobUpdate&) {
      r.job.set_state(state);
      r.lease_expire_time = expire;
      return quantd::OkStatus();
    };
  };
  Create(NewRecord("x1", kT0));
  Create(NewRecord("x2", kT0));
  Create(NewRecord("x3", kT0));
  Create(NewRecord("x4", kT0));
  ASSERT_TRUE(store_->UpdateJob("jobs/x1", lease(v1::RUNNING, kT0 + absl::Seconds(20))).ok());
  ASSERT_TRUE(store_->UpdateJob("jobs/x2", lease(v1::CANCELLING, kT0 + absl::Seconds(10))).ok());
  ASSERT_TRUE(store_->UpdateJob("jobs/x3", lease(v1::RUNNING, kT0 + absl::Seconds(40))).ok());
  ASSERT_TRUE(store_->UpdateJob("jobs/x4", lease(v1::SUCCEEDED, kT0 + absl::Seconds(5))).ok());

  auto expired = store_->ListExpiredLeases(kT0 + absl::Seconds(20), 10);
  ASSERT_TRUE(expired.ok()) << expired.status();
  EXPECT_EQ(*expired, (std::vector<std::string>{"jobs/x2", "jobs/x1"}));
  EXPECT_EQ(store_->ListExpiredLeases(kT0 + absl::Seconds(20), 1)->size(), 1u);
  EXPECT_TRUE(store_->ListExpiredLeases(kT0, 10)->empty());
}

TEST_P(JobStoreSuite, ListFiltersAndPagesWithKeysetCursor) {
  // Seven jobs, two tenants, labels and states; i seconds after kT0.
  for (int i = 0; i < 7; ++i) {
    JobRecord r =
        NewRecord(absl::StrCat("l", i), kT0 + absl::Seconds(i), i < 5 ? "acme" : "globex");
    (*r.job.mutable_spec()->mutable_labels())["parity"] = i % 2 == 0 ? "even" : "odd";
    if (i == 2 || i == 3) (*r.job.mutable_spec()->mutable_labels())["team"] = "nlp";
    if (i == 4) r.job.set_state(v1::SUCCEEDED);
    Create(r);
  }
  // Two jobs with the same create_time: the name breaks the tie.
  Create(NewRecord("l7b", kT0 + absl::Seconds(7), "acme"));
  Create(NewRecord("l7a", kT0 + absl::Seconds(7), "acme"));

  ListJobsQuery all;
  all.limit = 100;
  EXPECT_EQ(Names(*store_->ListJobs(all)),
            (std::vector<std::string>{"jobs/l7b", "jobs/l7a", "jobs/l6", "jobs/l5", "jobs/l4",
                                      "jobs/l3", "jobs/l2", "jobs/l1", "jobs/l0"}));
  all.ascending = true;
  EXPECT_EQ(Names(*store_->ListJobs(all)).front(), "jobs/l0");
  EXPECT_EQ(Names(*store_->ListJobs(all)).back(), "jobs/l7b");

  ListJobsQuery acme;
  acme.tenant = "acme";
  acme.limit = 100;
  EXPECT_EQ(store_->ListJobs(acme)->size(), 7u);

  ListJobsQuery even_queued;
  even_queued.tenant = "acme";
  even_queued.states = {v1::QUEUED};
  even_queued.labels = {{"parity", "even"}};
  even_queued.limit = 100;
  EXPECT_EQ(Names(*store_->ListJobs(even_queued)),
            (std::vector<std::string>{"jobs/l2", "jobs/l0"}));

  ListJobsQuery two_labels;
  two_labels.labels = {{"parity", "odd"}, {"team", "nlp"}};
  two_labels.limit = 100;
  EXPECT_EQ(Names(*store_->ListJobs(two_labels)), (std::vector<std::string>{"jobs/l3"}));

  ListJobsQuery done;
  done.states = {v1::SUCCEEDED, v1::FAILED};
  done.limit = 100;
  EXPECT_EQ(Names(*store_->ListJobs(done)), (std::vector<std::string>{"jobs/l4"}));

  // Page through everything three at a time, in both orders.
  for (bool ascending : {false, true}) {
    ListJobsQuery page;
    page.ascending = ascending;
    page.limit = 3;
    std::vector<std::string> seen;
    while (true) {
      auto records = store_->ListJobs(page);
      ASSERT_TRUE(records.ok()) << records.status();
      for (const auto& r : *records) seen.push_back(r.job.name());
      if (records->size() < 3) break;
      page.after = ListJobsQuery::Cursor{
          absl::FromUnixMicros(CreateTimeColumn(records->back().job)), records->back().job.name()};
    }
    all.ascending = ascending;
    EXPECT_EQ(seen, Names(*store_->ListJobs(all)));
  }
}

TEST_P(JobStoreSuite, ReopenedStoreHasEverything) {
  Create(NewRecord("r1", kT0, "acme", "req-1"), {StateEvent(v1::QUEUED), LogEvent("hello")});
  Create(NewRecord("r2", kT0 + absl::Seconds(1)));
  ASSERT_TRUE(store_
                  ->UpdateJob("jobs/r2",
                              [](JobRecord& r, JobUpdate& u) {
                                r.job.set_state(v1::RUNNING);
                                r.lease_token = 3;
                                r.lease_expire_time = kT0 + absl::Minutes(1);
                                r.lease_secret_hash = kSecretHash;
                                r.lease_holder = "anonymous";
                                u.events.push_back(StateEvent(v1::RUNNING));
                                return quantd::OkStatus();
                              })
                  .ok());
  const int version = store_->SchemaVersion();
  EXPECT_GE(version, 1);
  store_.reset();

  auto reopened = db_->Open();
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->SchemaVersion(), version);
  auto r1 = (*reopened)->GetJob("jobs/r1");
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->job.request_id(), "req-1");
  EXPECT_EQ((*reopened)->ListEvents("jobs/r1", 0, 10)->at(1).log().message(), "hello");
  auto r2 = (*reopened)->GetJob("jobs/r2");
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->job.state(), v1::RUNNING);
  EXPECT_EQ(r2->lease_token, 3);
  EXPECT_EQ(r2->lease_expire_time, kT0 + absl::Minutes(1));
  EXPECT_EQ(r2->lease_secret_hash, kSecretHash);
  EXPECT_EQ(r2->lease_holder, "anonymous");
  EXPECT_EQ(r2->last_sequence, 2);
  // The idempotency key survives the restart too.
  auto retry = (*reopened)->CreateJob(NewRecord("r3", kT0, "acme", "req-1"), {}, {});
  ASSERT_TRUE(retry.ok());
  EXPECT_FALSE(retry->created);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobStoreSuite, ::testing::ValuesIn(testing::AllTestBackends()),
                         [](const ::testing::TestParamInfo<TestBackend>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace quantd::server
