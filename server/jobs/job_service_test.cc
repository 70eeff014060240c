// JobService semantics (create, idempotency, get, list, cancel, watch,
// restart) on every store backend, with a FakeClock.
#include "server/jobs/job_service.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/jobs/job_transitions.h"
#include "server/jobs/jobs_test_fixture.h"
#include "server/jobs/request_validation.h"
#include "worker/common/status.h"

namespace quantd::server::testing {
namespace {

class JobServiceTest : public JobsTest {};

std::vector<std::string> Names(const v1::ListJobsResponse& response) {
  std::vector<std::string> names;
  for (const auto& job : response.jobs()) names.push_back(job.name());
  return names;
}

std::vector<std::string> Fields(const quantd::Status& status) {
  std::vector<std::string> fields;
  for (const auto& v : status.violations()) fields.push_back(v.field);
  return fields;
}

TEST_P(JobServiceTest, CreateStoresQueuedJobWithStableDefaults) {
  const absl::Time now = clock_.Now();
  v1::Job job = Create();
  ASSERT_EQ(job.name().size(), std::string("jobs/").size() + 26);
  const std::string id = job.name().substr(5);
  EXPECT_EQ(job.state(), v1::QUEUED);
  EXPECT_EQ(job.tenant(), "");
  EXPECT_EQ(FromTimestamp(job.create_time()), now);
  EXPECT_EQ(job.spec().max_attempts(), 3);
  EXPECT_EQ(job.spec().export_().output_uri(), "file:///srv/quantd/artifacts/" + id);
  EXPECT_EQ(job.attempt(), 0);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(Get(job.name()), job));

  auto events = Events(job.name());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].sequence(), 1);
  EXPECT_EQ(events[0].state(), v1::QUEUED);
  EXPECT_EQ(FromTimestamp(events[0].time()), now);
}

TEST_P(JobServiceTest, ExplicitSpecValuesAreKept) {
  v1::CreateJobRequest request = Request();
  request.mutable_spec()->set_max_attempts(5);
  request.mutable_spec()->mutable_export_()->set_output_uri("file:///out/x");
  auto job = jobs_->CreateJob(Caller::Anonymous(), request);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->spec().max_attempts(), 5);
  EXPECT_EQ(job->spec().export_().output_uri(), "file:///out/x");
}

TEST_P(JobServiceTest, InvalidRequestNamesEveryBadFieldAndStoresNothing) {
  options_.spec_check = [](const v1::JobSpec& spec, std::vector<std::string>*) {
    quantd::Status s = InvalidRequestError(
        {{"spec.quantization.scheme", "unknown scheme \"" + spec.quantization().scheme() + "\""}});
    return s;
  };
  Restart();
  v1::CreateJobRequest request = Request("");
  request.set_request_id(std::string(200, 'x'));
  request.mutable_spec()->mutable_quantization()->set_scheme("w_int5");
  auto job = jobs_->CreateJob(Caller::Anonymous(), request);
  EXPECT_EQ(job.status().code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().reason(), "INVALID_ARGUMENT");
  EXPECT_EQ(Fields(job.status()),
            (std::vector<std::string>{"request_id", "spec.model_uri", "spec.quantization.scheme"}));
  EXPECT_EQ(*store_->CountJobs(std::nullopt, v1::QUEUED), 0);

  v1::CreateJobRequest no_spec;
  EXPECT_EQ(Fields(jobs_->CreateJob(Caller::Anonymous(), no_spec).status()),
            std::vector<std::string>{"spec"});
}

TEST_P(JobServiceTest, EngineRefusalsPassThroughWithTheirCodeAndReason) {
  options_.spec_check = [](const v1::JobSpec&, std::vector<std::string>*) {
    quantd::Status s = MakeError(quantd::StatusCode::kUnimplemented, "FEATURE_NOT_BUILT",
                                 "spec.quantization.algorithms[0].gptq: GPTQ is not built yet");
    AddViolations(s, {{"spec.quantization.algorithms[0].gptq", "not built yet"}});
    return s;
  };
  Restart();
  auto job = jobs_->CreateJob(Caller::Anonymous(), Request());
  EXPECT_EQ(job.status().code(), quantd::StatusCode::kUnimplemented);
  EXPECT_EQ(job.status().reason(), "FEATURE_NOT_BUILT");
  EXPECT_EQ(Fields(job.status()), std::vector<std::string>{"spec.quantization.algorithms[0].gptq"});
}

TEST_P(JobServiceTest, ValidateOnlyStoresNothing) {
  v1::CreateJobRequest request = Request();
  request.set_validate_only(true);
  auto job = jobs_->CreateJob(Caller::Anonymous(), request);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->name(), "");
  EXPECT_EQ(job->spec().max_attempts(), 3);
  v1::ListJobsRequest list;
  EXPECT_EQ(jobs_->ListJobs(Caller::Anonymous(), list)->jobs_size(), 0);
}

TEST_P(JobServiceTest, EngineWarningsBecomeTheJobsFirstLogEvents) {
  options_.spec_check = [](const v1::JobSpec&, std::vector<std::string>* warnings) {
    warnings->push_back("spec.quantization.exclude[0]: pattern \"*.nope\" matches no layer");
    return quantd::OkStatus();
  };
  Restart();
  auto job = jobs_->CreateJob(Caller::Anonymous(), Request("file:///m"));
  ASSERT_TRUE(job.ok()) << job.status();
  auto events = Events(job->name());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].state(), v1::QUEUED);
  EXPECT_EQ(events[1].sequence(), 2);
  EXPECT_EQ(events[1].log().severity(), v1::WARNING);
  EXPECT_EQ(events[1].log().message(),
            "spec.quantization.exclude[0]: pattern \"*.nope\" matches no layer");
}

TEST_P(JobServiceTest, CreateIsIdempotentOnRequestId) {
  auto first = jobs_->CreateJob(Caller::Anonymous(), Request("file:///m", "req-1"));
  ASSERT_TRUE(first.ok());
  clock_.Advance(absl::Seconds(5));
  auto retry = jobs_->CreateJob(Caller::Anonymous(), Request("file:///m", "req-1"));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->name(), first->name());
  EXPECT_EQ(retry->create_time().seconds(), first->create_time().seconds());

  auto reuse = jobs_->CreateJob(Caller::Anonymous(), Request("file:///other", "req-1"));
  EXPECT_EQ(reuse.status().code(), quantd::StatusCode::kAlreadyExists);
  EXPECT_EQ(reuse.status().reason(), "REQUEST_ID_REUSED");
  EXPECT_EQ(reuse.status().message(),
            absl::StrCat("request_id \"req-1\" was already used for ", first->name(),
                         " with a different spec (differs in: model_uri); use a new request_id "
                         "for a different job"));

  // The same request_id in another tenant is another job.
  auto other = jobs_->CreateJob(Caller{"acme", Role::kSubmitter}, Request("file:///m", "req-1"));
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->name(), first->name());
  EXPECT_EQ(other->tenant(), "acme");
}

TEST_P(JobServiceTest, SpecDifferenceNamesTopLevelFields) {
  v1::JobSpec a;
  a.set_model_uri("file:///m");
  (*a.mutable_labels())["x"] = "1";
  v1::JobSpec b = a;
  b.set_device("cpu");
  (*b.mutable_labels())["x"] = "2";
  EXPECT_EQ(DescribeSpecDifference(a, b), "device, labels");
  EXPECT_EQ(DescribeSpecDifference(a, a), "");
}

TEST_P(JobServiceTest, QueueLimitPerTenant) {
  options_.max_queued_per_tenant = 2;
  Restart();
  Caller acme{"acme", Role::kSubmitter};
  Create("file:///a", acme);
  Create("file:///b", acme);
  auto third = jobs_->CreateJob(acme, Request("file:///c"));
  EXPECT_EQ(third.status().code(), quantd::StatusCode::kResourceExhausted);
  EXPECT_EQ(third.status().reason(), "QUEUE_FULL");
  EXPECT_TRUE(jobs_->CreateJob(Caller{"globex", Role::kSubmitter}, Request()).ok());
}

// A spec over 256 KiB is refused before anything parses it, naming the
// field that makes it large (the 12 MiB config of issue 17 included) and
// every other bad field; nothing is stored.
TEST_P(JobServiceTest, OversizedSpecIsRefusedNamingTheLargeFields) {
  for (size_t bytes : {size_t{300} << 10, size_t{12} << 20}) {
    v1::CreateJobRequest request = Request();
    request.mutable_spec()->mutable_quantization()->set_quark_json(std::string(bytes, '['));
    request.set_request_id(std::string(129, 'r'));
    auto refused = jobs_->CreateJob(Caller::Anonymous(), request);
    EXPECT_EQ(refused.status().code(), quantd::StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.status().reason(), "JOB_SPEC_TOO_LARGE");
    EXPECT_EQ(Fields(refused.status()),
              (std::vector<std::string>{"request_id", "spec.quantization.quark_json"}));
    const std::string description = refused.status().violations()[1].description;
    EXPECT_NE(description.find(absl::StrCat(bytes, " bytes make the job spec too large")),
              std::string::npos)
        << description;
    EXPECT_NE(description.find("at most 262144"), std::string::npos) << description;
  }
  // Two large fields are both named; a large list by its own name.
  v1::CreateJobRequest two = Request();
  two.mutable_spec()->mutable_quantization()->set_quark_json(std::string(200 << 10, 'x'));
  for (int i = 0; i < 5000; ++i) {
    two.mutable_spec()->mutable_quantization()->add_exclude(absl::StrCat("model.layers.", i, ".*"));
  }
  two.mutable_spec()->set_model_uri("file:///" + std::string(40 << 10, 'm'));
  auto refused = jobs_->CreateJob(Caller::Anonymous(), two);
  EXPECT_EQ(Fields(refused.status()),
            (std::vector<std::string>{"spec.model_uri", "spec.quantization.quark_json",
                                      "spec.quantization.exclude"}));
  v1::ListJobsRequest list;
  EXPECT_EQ(jobs_->ListJobs(Caller::Anonymous(), list)->jobs_size(), 0);

  // Just under the limit is accepted (and deliverable).
  v1::CreateJobRequest fits = Request();
  fits.mutable_spec()->mutable_quantization()->set_quark_json(std::string(250 << 10, ' '));
  EXPECT_LE(fits.spec().ByteSizeLong(), kMaxJobSpecBytes);
  EXPECT_TRUE(jobs_->CreateJob(Caller::Anonymous(), fits).ok());
}

// ListJobs answers in the BASIC view unless asked for FULL: no quantization
// config content and no per-block metrics, the kind of config kept. GetJob
// is FULL.
TEST_P(JobServiceTest, ListJobsBasicViewOmitsTheBulkyPartsFullHasThem) {
  v1::CreateJobRequest json = Request();
  v1::QuantizationSettings* q = json.mutable_spec()->mutable_quantization();
  q->set_quark_json(R"({"global_quant_config": {"weight": {"dtype": "int4"}}})");
  q->add_exclude("lm_head");
  q->add_algorithms()->mutable_gptq();
  (*json.mutable_spec()->mutable_labels())["team"] = "nlp";
  v1::Job json_job = *jobs_->CreateJob(Caller::Anonymous(), json);
  clock_.Advance(absl::Seconds(1));
  v1::CreateJobRequest structured = Request();
  structured.mutable_spec()->mutable_quantization()->mutable_config()->add_exclude("lm_head");
  v1::Job structured_job = *jobs_->CreateJob(Caller::Anonymous(), structured);
  clock_.Advance(absl::Seconds(1));
  v1::Job scheme_job = Create("file:///models/scheme");
  // The oldest job finishes with per-block metrics.
  v1::LeaseJobResponse lease = Lease();
  ASSERT_EQ(lease.job().name(), json_job.name());
  v1::CompleteJobRequest complete;
  *complete.mutable_lease() = lease.lease();
  complete.mutable_result()->mutable_metrics()->add_blocks()->set_block(1);
  complete.mutable_result()->mutable_metrics()->mutable_float_perplexity()->set_perplexity(7.5);
  ASSERT_TRUE(leases_->CompleteJob(Caller::Anonymous(), complete).ok());

  v1::ListJobsRequest request;
  auto basic = jobs_->ListJobs(Caller::Anonymous(), request);
  ASSERT_TRUE(basic.ok()) << basic.status();
  ASSERT_EQ(basic->jobs_size(), 3);
  const v1::Job& b_scheme = basic->jobs(0);
  const v1::Job& b_structured = basic->jobs(1);
  const v1::Job& b_json = basic->jobs(2);
  EXPECT_EQ(b_scheme.spec().quantization().scheme(), "w_int4_per_group_sym");
  EXPECT_EQ(b_structured.spec().quantization().source_case(), v1::QuantizationSettings::kConfig);
  EXPECT_EQ(b_structured.spec().quantization().config().ByteSizeLong(), 0u);
  EXPECT_EQ(b_json.spec().quantization().source_case(), v1::QuantizationSettings::kQuarkJson);
  EXPECT_EQ(b_json.spec().quantization().quark_json(), "");
  EXPECT_EQ(b_json.spec().quantization().exclude_size(), 0);
  EXPECT_EQ(b_json.spec().quantization().algorithms_size(), 0);
  EXPECT_EQ(b_json.result().metrics().blocks_size(), 0);
  // Everything else is there.
  EXPECT_EQ(b_json.state(), v1::SUCCEEDED);
  EXPECT_EQ(b_json.spec().labels().at("team"), "nlp");
  EXPECT_EQ(b_json.result().metrics().float_perplexity().perplexity(), 7.5);
  EXPECT_EQ(b_json.spec().model_uri(), json.spec().model_uri());

  request.set_view(v1::BASIC);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      *jobs_->ListJobs(Caller::Anonymous(), request), *basic));
  request.set_view(v1::FULL);
  auto full = jobs_->ListJobs(Caller::Anonymous(), request);
  ASSERT_TRUE(full.ok());
  ASSERT_EQ(full->jobs_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(full->jobs(i),
                                                                   Get(full->jobs(i).name())))
        << full->jobs(i).name();
  }
  EXPECT_EQ(full->jobs(2).spec().quantization().quark_json(), q->quark_json());
  EXPECT_EQ(full->jobs(2).result().metrics().blocks_size(), 1);
  EXPECT_EQ(full->jobs(1).spec().quantization().config().exclude(0), "lm_head");
  EXPECT_EQ(Get(json_job.name()).spec().quantization().exclude(0), "lm_head");  // GetJob: FULL

  request.set_view(static_cast<v1::JobView>(7));
  auto bad = jobs_->ListJobs(Caller::Anonymous(), request);
  EXPECT_EQ(bad.status().code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(Fields(bad.status()), std::vector<std::string>{"view"});
}

// A page of big jobs stops before it passes what a client can receive; the
// page token continues where it stopped, so paging still sees every job.
TEST_P(JobServiceTest, ListPagesStayUnderTheResponseSizeLimit) {
  std::vector<std::string> created;
  for (int i = 0; i < 20; ++i) {
    v1::CreateJobRequest request = Request(absl::StrCat("file:///m", i));
    request.mutable_spec()->mutable_quantization()->set_quark_json(std::string(200 << 10, 'j'));
    created.push_back(jobs_->CreateJob(Caller::Anonymous(), request)->name());
    clock_.Advance(absl::Milliseconds(1));
  }
  v1::ListJobsRequest request;
  request.set_view(v1::FULL);
  request.set_order_by("create_time asc");
  std::vector<std::string> seen;
  int pages = 0;
  while (true) {
    auto page = jobs_->ListJobs(Caller::Anonymous(), request);
    ASSERT_TRUE(page.ok()) << page.status();
    ++pages;
    EXPECT_LE(page->ByteSizeLong(), kMaxListResponseBytes);
    EXPECT_GT(page->jobs_size(), 0);
    for (const auto& job : page->jobs()) seen.push_back(job.name());
    if (page->next_page_token().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  EXPECT_EQ(seen, created);
  EXPECT_GE(pages, 2);
  // BASIC drops the configs: one page holds them all.
  v1::ListJobsRequest basic;
  EXPECT_EQ(jobs_->ListJobs(Caller::Anonymous(), basic)->jobs_size(), 20);
}

TEST_P(JobServiceTest, GetRefusesMalformedUnknownAndForeignNames) {
  v1::Job job = Create("file:///m", Caller{"acme", Role::kSubmitter});
  v1::GetJobRequest request;
  request.set_name("not-a-name");
  auto malformed = jobs_->GetJob(Caller::Anonymous(), request);
  EXPECT_EQ(malformed.status().code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(Fields(malformed.status()), std::vector<std::string>{"name"});

  request.set_name("jobs/00000000000000000000000000");
  auto unknown = jobs_->GetJob(Caller::Anonymous(), request);
  EXPECT_EQ(unknown.status().code(), quantd::StatusCode::kNotFound);
  EXPECT_EQ(unknown.status().reason(), "JOB_NOT_FOUND");

  request.set_name(job.name());
  auto foreign = jobs_->GetJob(Caller{"globex", Role::kSubmitter}, request);
  EXPECT_EQ(foreign.status().code(), quantd::StatusCode::kNotFound);
  EXPECT_EQ(foreign.status().message(), job.name() + " does not exist");
  EXPECT_TRUE(jobs_->GetJob(Caller{"acme", Role::kSubmitter}, request).ok());
  EXPECT_TRUE(jobs_->GetJob(Caller{"ops", Role::kAdmin}, request).ok());
  EXPECT_EQ(jobs_->GetJob(Caller{"acme", Role::kWorker}, request).status().code(),
            quantd::StatusCode::kPermissionDenied);
}

TEST_P(JobServiceTest, ListFiltersByStateAndLabelsWithinTheTenant) {
  Caller acme{"acme", Role::kSubmitter};
  std::vector<std::string> names;
  for (int i = 0; i < 4; ++i) {
    v1::CreateJobRequest request = Request(absl::StrCat("file:///m", i));
    (*request.mutable_spec()->mutable_labels())["team"] = i < 2 ? "nlp" : "vision";
    names.push_back(jobs_->CreateJob(acme, request)->name());
    clock_.Advance(absl::Seconds(1));
  }
  Create("file:///other", Caller{"globex", Role::kSubmitter});
  v1::CancelJobRequest cancel;
  cancel.set_name(names[0]);
  ASSERT_TRUE(jobs_->CancelJob(acme, cancel).ok());

  v1::ListJobsRequest all;
  EXPECT_EQ(Names(*jobs_->ListJobs(acme, all)),
            (std::vector<std::string>{names[3], names[2], names[1], names[0]}));
  EXPECT_EQ(jobs_->ListJobs(Caller::Anonymous(), all)->jobs_size(), 5);  // admin: every tenant

  v1::ListJobsRequest nlp_queued;
  nlp_queued.add_states(v1::QUEUED);
  (*nlp_queued.mutable_labels())["team"] = "nlp";
  EXPECT_EQ(Names(*jobs_->ListJobs(acme, nlp_queued)), std::vector<std::string>{names[1]});

  v1::ListJobsRequest cancelled;
  cancelled.add_states(v1::CANCELLED);
  cancelled.set_order_by("create_time asc");
  EXPECT_EQ(Names(*jobs_->ListJobs(acme, cancelled)), std::vector<std::string>{names[0]});

  v1::ListJobsRequest negative;
  negative.set_page_size(-5);
  auto refused = jobs_->ListJobs(acme, negative);
  EXPECT_EQ(refused.status().code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(Fields(refused.status()), std::vector<std::string>{"page_size"});
}

TEST_P(JobServiceTest, ListPagesWithOpaqueTokensDefaultAndMaximumSize) {
  std::vector<std::string> created;
  for (int i = 0; i < 53; ++i) {
    created.push_back(Create(absl::StrCat("file:///m", i)).name());
    if (i % 3 == 0) clock_.Advance(absl::Milliseconds(1));  // some share a create_time
  }
  // Default page size 50, newest first.
  v1::ListJobsRequest request;
  auto page1 = jobs_->ListJobs(Caller::Anonymous(), request);
  ASSERT_TRUE(page1.ok()) << page1.status();
  EXPECT_EQ(page1->jobs_size(), 50);
  EXPECT_EQ(page1->jobs(0).name(), created.back());
  ASSERT_FALSE(page1->next_page_token().empty());
  request.set_page_token(page1->next_page_token());
  auto page2 = jobs_->ListJobs(Caller::Anonymous(), request);
  ASSERT_TRUE(page2.ok()) << page2.status();
  EXPECT_EQ(Names(*page2), (std::vector<std::string>{created[2], created[1], created[0]}));
  EXPECT_TRUE(page2->next_page_token().empty());

  // Ascending pages of 20 see every job once, in creation order.
  v1::ListJobsRequest asc;
  asc.set_order_by("create_time asc");
  asc.set_page_size(20);
  std::vector<std::string> seen;
  do {
    auto page = jobs_->ListJobs(Caller::Anonymous(), asc);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const auto& job : page->jobs()) seen.push_back(job.name());
    asc.set_page_token(page->next_page_token());
  } while (!asc.page_token().empty());
  EXPECT_EQ(seen, created);

  // Above the maximum is capped at 500 rather than refused.
  v1::ListJobsRequest huge;
  huge.set_page_size(100000);
  EXPECT_EQ(jobs_->ListJobs(Caller::Anonymous(), huge)->jobs_size(), 53);

  // A token is bound to its query.
  v1::ListJobsRequest other_filter;
  other_filter.add_states(v1::QUEUED);
  other_filter.set_page_token(page1->next_page_token());
  auto refused = jobs_->ListJobs(Caller::Anonymous(), other_filter);
  EXPECT_EQ(refused.status().code(), quantd::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().reason(), "INVALID_PAGE_TOKEN");
  v1::ListJobsRequest garbage;
  garbage.set_page_token("garbage");
  EXPECT_EQ(jobs_->ListJobs(Caller::Anonymous(), garbage).status().code(),
            quantd::StatusCode::kInvalidArgument);
}

TEST_P(JobServiceTest, CancelInEveryState) {
  v1::CancelJobRequest cancel;
  // QUEUED -> CANCELLED at once.
  v1::Job queued = Create("file:///q");
  cancel.set_name(queued.name());
  auto cancelled = jobs_->CancelJob(Caller::Anonymous(), cancel);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::CANCELLED);
  EXPECT_EQ(FromTimestamp(cancelled->end_time()), clock_.Now());
  EXPECT_EQ(Events(queued.name()).back().state(), v1::CANCELLED);
  // CANCELLED -> FAILED_PRECONDITION.
  auto again = jobs_->CancelJob(Caller::Anonymous(), cancel);
  EXPECT_EQ(again.status().code(), quantd::StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.status().reason(), "JOB_ALREADY_FINISHED");

  // RUNNING -> CANCELLING; the worker learns it from its heartbeat.
  v1::Job running = Create("file:///r");
  v1::LeaseJobResponse lease = Lease();
  ASSERT_EQ(lease.job().name(), running.name());
  cancel.set_name(running.name());
  auto cancelling = jobs_->CancelJob(Caller::Anonymous(), cancel);
  ASSERT_TRUE(cancelling.ok());
  EXPECT_EQ(cancelling->state(), v1::CANCELLING);
  v1::HeartbeatRequest heartbeat;
  *heartbeat.mutable_lease() = lease.lease();
  EXPECT_TRUE(leases_->Heartbeat(Caller::Anonymous(), heartbeat)->cancel_requested());
  // CANCELLING stays CANCELLING, without a new event.
  const size_t events_before = Events(running.name()).size();
  EXPECT_EQ(jobs_->CancelJob(Caller::Anonymous(), cancel)->state(), v1::CANCELLING);
  EXPECT_EQ(Events(running.name()).size(), events_before);
  // The worker stops and reports it.
  v1::FailJobRequest stop;
  *stop.mutable_lease() = lease.lease();
  stop.set_cancelled(true);
  ASSERT_TRUE(leases_->FailJob(Caller::Anonymous(), stop).ok());
  EXPECT_EQ(Get(running.name()).state(), v1::CANCELLED);

  // SUCCEEDED and FAILED -> FAILED_PRECONDITION.
  for (bool succeed : {true, false}) {
    v1::Job job = Create("file:///s");
    v1::LeaseJobResponse l = Lease();
    if (succeed) {
      v1::CompleteJobRequest complete;
      *complete.mutable_lease() = l.lease();
      ASSERT_TRUE(leases_->CompleteJob(Caller::Anonymous(), complete).ok());
    } else {
      v1::FailJobRequest fail;
      *fail.mutable_lease() = l.lease();
      fail.mutable_error()->set_code(3);
      fail.mutable_error()->set_message("bad model");
      ASSERT_TRUE(leases_->FailJob(Caller::Anonymous(), fail).ok());
    }
    cancel.set_name(job.name());
    auto refused = jobs_->CancelJob(Caller::Anonymous(), cancel);
    EXPECT_EQ(refused.status().code(), quantd::StatusCode::kFailedPrecondition);
    EXPECT_EQ(refused.status().message(),
              job.name() + (succeed ? " already ended SUCCEEDED" : " already ended FAILED") +
                  "; there is nothing to cancel");
  }
  // Another tenant cannot cancel.
  v1::Job mine = Create("file:///mine", Caller{"acme", Role::kSubmitter});
  cancel.set_name(mine.name());
  EXPECT_EQ(jobs_->CancelJob(Caller{"globex", Role::kSubmitter}, cancel).status().code(),
            quantd::StatusCode::kNotFound);
  EXPECT_EQ(Get(mine.name()).state(), v1::QUEUED);
}

TEST_P(JobServiceTest, WatchReplaysFromSequenceThenFollowsUntilTheEnd) {
  v1::Job job = Create();
  v1::LeaseJobResponse lease = Lease();
  v1::ReportEventsRequest report;
  *report.mutable_lease() = lease.lease();
  report.add_events()->mutable_progress()->set_stage(v1::LOAD);
  ASSERT_TRUE(leases_->ReportEvents(Caller::Anonymous(), report).ok());
  // So far: 1 QUEUED, 2 log (leased), 3 RUNNING, 4 progress.

  absl::Mutex mu;
  std::vector<v1::JobEvent> received;
  absl::Notification saw_four;
  quantd::Status result;
  std::thread watcher([&] {
    v1::WatchJobRequest request;
    request.set_name(job.name());
    request.set_after_sequence(1);
    WatchStream stream;
    stream.send = [&](const v1::JobEvent& e) {
      absl::MutexLock lock(&mu);
      received.push_back(e);
      if (e.sequence() == 4) saw_four.Notify();
      return true;
    };
    result = jobs_->WatchJob(Caller::Anonymous(), request, stream);
  });
  ASSERT_TRUE(saw_four.WaitForNotificationWithTimeout(absl::Seconds(30)));
  // Live events while the stream is open.
  report.clear_events();
  report.add_events()->mutable_log()->set_message("block 1/2 done");
  ASSERT_TRUE(leases_->ReportEvents(Caller::Anonymous(), report).ok());
  v1::CompleteJobRequest complete;
  *complete.mutable_lease() = lease.lease();
  complete.mutable_result()->add_artifacts()->set_uri("file:///out");
  ASSERT_TRUE(leases_->CompleteJob(Caller::Anonymous(), complete).ok());
  watcher.join();

  EXPECT_TRUE(result.ok()) << result;
  absl::MutexLock lock(&mu);
  ASSERT_EQ(received.size(), 6u);
  for (size_t i = 0; i < received.size(); ++i) EXPECT_EQ(received[i].sequence(), i + 2);
  EXPECT_EQ(received[2].progress().stage(), v1::LOAD);
  EXPECT_EQ(received[3].log().message(), "block 1/2 done");
  EXPECT_EQ(received[4].result().artifacts(0).uri(), "file:///out");
  EXPECT_EQ(received[5].state(), v1::SUCCEEDED);
}

TEST_P(JobServiceTest, WatchOfAFinishedJobReplaysAndEnds) {
  v1::Job job = Create();
  v1::CancelJobRequest cancel;
  cancel.set_name(job.name());
  ASSERT_TRUE(jobs_->CancelJob(Caller::Anonymous(), cancel).ok());
  std::vector<int64_t> sequences;
  v1::WatchJobRequest request;
  request.set_name(job.name());
  WatchStream stream;
  stream.send = [&](const v1::JobEvent& e) {
    sequences.push_back(e.sequence());
    return true;
  };
  EXPECT_TRUE(jobs_->WatchJob(Caller::Anonymous(), request, stream).ok());
  EXPECT_EQ(sequences, (std::vector<int64_t>{1, 2, 3}));
  // Resuming past the end returns at once with nothing.
  sequences.clear();
  request.set_after_sequence(3);
  EXPECT_TRUE(jobs_->WatchJob(Caller::Anonymous(), request, stream).ok());
  EXPECT_TRUE(sequences.empty());
  request.set_after_sequence(-1);
  EXPECT_EQ(jobs_->WatchJob(Caller::Anonymous(), request, stream).code(),
            quantd::StatusCode::kInvalidArgument);
}

TEST_P(JobServiceTest, SlowWatcherNeverBlocksTheWorker) {
  v1::Job job = Create();
  v1::LeaseJobResponse lease = Lease();
  absl::Notification reader_stuck;
  absl::Notification release_reader;
  std::thread watcher([&] {
    v1::WatchJobRequest request;
    request.set_name(job.name());
    WatchStream stream;
    stream.send = [&](const v1::JobEvent&) {
      if (!reader_stuck.HasBeenNotified()) reader_stuck.Notify();
      release_reader.WaitForNotification();  // a reader that does not read
      return true;
    };
    EXPECT_TRUE(jobs_->WatchJob(Caller::Anonymous(), request, stream).ok());
  });
  ASSERT_TRUE(reader_stuck.WaitForNotificationWithTimeout(absl::Seconds(30)));
  // While the reader is stuck, the worker reports 200 events and completes.
  const absl::Time start = absl::Now();
  v1::ReportEventsRequest report;
  *report.mutable_lease() = lease.lease();
  for (int i = 0; i < 200; ++i) {
    report.clear_events();
    report.add_events()->mutable_progress()->set_block(i);
    ASSERT_TRUE(leases_->ReportEvents(Caller::Anonymous(), report).ok());
  }
  v1::CompleteJobRequest complete;
  *complete.mutable_lease() = lease.lease();
  ASSERT_TRUE(leases_->CompleteJob(Caller::Anonymous(), complete).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(Get(job.name()).state(), v1::SUCCEEDED);
  release_reader.Notify();
  watcher.join();
}

TEST_P(JobServiceTest, WatchEndsWhenTheReaderGoesAwayOrTheServerStops) {
  v1::Job job = Create();
  v1::WatchJobRequest request;
  request.set_name(job.name());
  WatchStream gone;
  gone.send = [](const v1::JobEvent&) { return false; };
  EXPECT_EQ(jobs_->WatchJob(Caller::Anonymous(), request, gone).code(),
            quantd::StatusCode::kCancelled);

  std::atomic<int> sent{0};
  quantd::Status result;
  std::thread watcher([&] {
    WatchStream stream;
    stream.send = [&](const v1::JobEvent&) {
      ++sent;
      return true;
    };
    result = jobs_->WatchJob(Caller::Anonymous(), request, stream);
  });
  while (sent.load() == 0) absl::SleepFor(absl::Milliseconds(1));
  notifier_->Shutdown();
  watcher.join();
  EXPECT_EQ(result.code(), quantd::StatusCode::kUnavailable);
  EXPECT_EQ(result.reason(), "SHUTTING_DOWN");
}

TEST_P(JobServiceTest, ConcurrentWatchLimit) {
  options_.max_concurrent_watches = 1;
  Restart();
  v1::Job job = Create();
  absl::Notification first_open;
  std::thread first([&] {
    v1::WatchJobRequest request;
    request.set_name(job.name());
    WatchStream stream;
    stream.send = [&](const v1::JobEvent&) {
      if (!first_open.HasBeenNotified()) first_open.Notify();
      return true;
    };
    EXPECT_TRUE(jobs_->WatchJob(Caller::Anonymous(), request, stream).ok());
  });
  ASSERT_TRUE(first_open.WaitForNotificationWithTimeout(absl::Seconds(30)));
  v1::WatchJobRequest request;
  request.set_name(job.name());
  WatchStream stream;
  stream.send = [](const v1::JobEvent&) { return true; };
  quantd::Status second = jobs_->WatchJob(Caller::Anonymous(), request, stream);
  EXPECT_EQ(second.code(), quantd::StatusCode::kResourceExhausted);
  EXPECT_EQ(second.reason(), "TOO_MANY_WATCHES");
  v1::CancelJobRequest cancel;
  cancel.set_name(job.name());
  ASSERT_TRUE(jobs_->CancelJob(Caller::Anonymous(), cancel).ok());
  first.join();
  EXPECT_EQ(jobs_->active_watches(), 0);
}

// One tenant cannot hold every WatchJob stream of a frontend: past its
// own limit it is RESOURCE_EXHAUSTED naming the tenant limit, while other
// tenants still watch; closing a stream frees its slot.
TEST_P(JobServiceTest, WatchLimitPerTenant) {
  options_.max_watches_per_tenant = 2;
  options_.max_concurrent_watches = 100;
  Restart();
  Caller acme{"acme", Role::kSubmitter, "sha256:acme"};
  Caller globex{"globex", Role::kSubmitter, "sha256:globex"};
  v1::Job acme_job = Create("file:///a", acme);
  v1::Job globex_job = Create("file:///g", globex);

  // A stream held open until `stop`; `open` once it sent its first event.
  struct Watcher {
    absl::Notification open;
    std::atomic<bool> stop{false};
    quantd::Status result;
    std::thread thread;
  };
  auto watch = [&](const Caller& caller, const std::string& name, Watcher& w) {
    w.thread = std::thread([&, caller, name] {
      v1::WatchJobRequest request;
      request.set_name(name);
      WatchStream stream;
      stream.send = [&w](const v1::JobEvent&) {
        if (!w.open.HasBeenNotified()) w.open.Notify();
        return true;
      };
      stream.cancelled = [&w] { return w.stop.load(); };
      w.result = jobs_->WatchJob(caller, request, stream);
      if (!w.open.HasBeenNotified()) w.open.Notify();
    });
  };
  Watcher a1, a2, a3, g1;
  watch(acme, acme_job.name(), a1);
  watch(acme, acme_job.name(), a2);
  ASSERT_TRUE(a1.open.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(a2.open.WaitForNotificationWithTimeout(absl::Seconds(60)));
  watch(acme, acme_job.name(), a3);
  a3.thread.join();
  EXPECT_EQ(a3.result.code(), quantd::StatusCode::kResourceExhausted) << a3.result;
  EXPECT_EQ((a3.result).reason(), "TOO_MANY_WATCHES");
  EXPECT_NE(a3.result.message().find("tenant \"acme\" already has 2 WatchJob streams"),
            std::string::npos)
      << a3.result;
  EXPECT_NE(a3.result.message().find("--max-watches-per-tenant"), std::string::npos);

  // Another tenant is served.
  watch(globex, globex_job.name(), g1);
  ASSERT_TRUE(g1.open.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(jobs_->active_watches(), 3);

  // acme closes one stream and may open another.
  a1.stop = true;
  a1.thread.join();
  EXPECT_EQ(a1.result.code(), quantd::StatusCode::kCancelled);
  Watcher a4;
  watch(acme, acme_job.name(), a4);
  ASSERT_TRUE(a4.open.WaitForNotificationWithTimeout(absl::Seconds(60)));
  for (Watcher* w : {&a2, &a4, &g1}) {
    w->stop = true;
    w->thread.join();
    EXPECT_EQ(w->result.code(), quantd::StatusCode::kCancelled) << w->result;
  }
  EXPECT_EQ(jobs_->active_watches(), 0);
}

TEST_P(JobServiceTest, RestartLosesNothingAndWatchResumes) {
  std::vector<std::string> names;
  for (int i = 0; i < 3; ++i) names.push_back(Create(absl::StrCat("file:///m", i)).name());
  v1::LeaseJobResponse lease = Lease();
  ASSERT_EQ(lease.job().name(), names[0]);

  Restart();  // a new quantd process on the same database

  v1::ListJobsRequest list;
  list.set_order_by("create_time asc");
  EXPECT_EQ(Names(*jobs_->ListJobs(Caller::Anonymous(), list)), names);
  EXPECT_EQ(Get(names[0]).state(), v1::RUNNING);
  // The running job's worker carries on against the new process.
  EXPECT_TRUE(Heartbeat(lease.lease()).ok());
  // The queued ones are leased in order.
  EXPECT_EQ(Lease("w2").job().name(), names[1]);
  EXPECT_EQ(Lease("w3").job().name(), names[2]);
  // Watching resumes from a sequence seen before the restart.
  v1::CompleteJobRequest complete;
  *complete.mutable_lease() = lease.lease();
  ASSERT_TRUE(leases_->CompleteJob(Caller::Anonymous(), complete).ok());
  v1::WatchJobRequest watch;
  watch.set_name(names[0]);
  watch.set_after_sequence(3);
  std::vector<int64_t> sequences;
  WatchStream stream;
  stream.send = [&](const v1::JobEvent& e) {
    sequences.push_back(e.sequence());
    return true;
  };
  EXPECT_TRUE(jobs_->WatchJob(Caller::Anonymous(), watch, stream).ok());
  EXPECT_EQ(sequences, (std::vector<int64_t>{4, 5}));  // the result, then SUCCEEDED
}

INSTANTIATE_TEST_SUITE_P(Backends, JobServiceTest, ::testing::ValuesIn(AllTestBackends()),
                         BackendName);

}  // namespace
}  // namespace quantd::server::testing
