package quantd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang/protobuf/ptypes"
	pb "github.com/quantd/quantd/client/go/gen/quantd/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// fakeService is a QuantizationService whose methods the tests set.
type fakeService struct {
	pb.UnimplementedQuantizationServiceServer
	mu        sync.Mutex
	createJob func(*pb.CreateJobRequest) (*pb.Job, error)
	getJob    func(context.Context, *pb.GetJobRequest) (*pb.Job, error)
	listJobs  func(*pb.ListJobsRequest) (*pb.ListJobsResponse, error)
	cancelJob func(*pb.CancelJobRequest) (*pb.Job, error)
	watchJob  func(*pb.WatchJobRequest, pb.QuantizationService_WatchJobServer) error
	calls     map[string]int
}

func (f *fakeService) count(method string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[method]++
}

func (f *fakeService) callCount(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

func (f *fakeService) CreateJob(_ context.Context, r *pb.CreateJobRequest) (*pb.Job, error) {
	f.count("CreateJob")
	return f.createJob(r)
}

func (f *fakeService) GetJob(ctx context.Context, r *pb.GetJobRequest) (*pb.Job, error) {
	f.count("GetJob")
	return f.getJob(ctx, r)
}

func (f *fakeService) ListJobs(_ context.Context, r *pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
	f.count("ListJobs")
	return f.listJobs(r)
}

func (f *fakeService) CancelJob(_ context.Context, r *pb.CancelJobRequest) (*pb.Job, error) {
	f.count("CancelJob")
	return f.cancelJob(r)
}

func (f *fakeService) WatchJob(r *pb.WatchJobRequest, s pb.QuantizationService_WatchJobServer) error {
	f.count("WatchJob")
	return f.watchJob(r, s)
}

// serve starts f on an in-memory listener and dials it. Debian's grpc-go
// 1.33 needs the codec on the server too (see codec.go).
func serve(t *testing.T, f *fakeService, opts ...Option) *Client {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	server := grpc.NewServer(grpc.CustomCodec(codec{}))
	pb.RegisterQuantizationServiceServer(server, f)
	go server.Serve(lis)
	t.Cleanup(server.Stop)
	dialer := func(context.Context, string) (net.Conn, error) { return lis.Dial() }
	opts = append([]Option{WithDialOptions(grpc.WithContextDialer(dialer))}, opts...)
	c, err := Dial(context.Background(), "localhost:50051", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// refusal is INVALID_ARGUMENT with every detail kind quantd sends.
func refusal(t *testing.T) *status.Status {
	t.Helper()
	st, err := status.New(codes.InvalidArgument, "invalid request (2 violations)").WithDetails(
		&errdetails.ErrorInfo{Reason: "INVALID_JOB_SPEC", Domain: "quantd", Metadata: map[string]string{"field": "spec"}},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: `spec.labels["Bad Key"]`, Description: "a label key starts with a lowercase letter or a digit"},
			{Field: "spec.quantization.scheme", Description: "unknown quantization scheme 'w_int9_bogus'"},
		}},
		&errdetails.RetryInfo{RetryDelay: ptypes.DurationProto(1500 * time.Millisecond)},
	)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestErrorCarriesTheStatusDetails(t *testing.T) {
	st := refusal(t)
	c := serve(t, &fakeService{getJob: func(context.Context, *pb.GetJobRequest) (*pb.Job, error) {
		return nil, st.Err()
	}})
	_, err := c.Get(context.Background(), "jobs/x")
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Get error %T %v, want *Error", err, err)
	}
	if e.Code != codes.InvalidArgument || e.Reason != "INVALID_JOB_SPEC" || e.Domain != "quantd" {
		t.Errorf("code %v reason %q domain %q", e.Code, e.Reason, e.Domain)
	}
	if e.Message != "invalid request (2 violations)" {
		t.Errorf("message %q", e.Message)
	}
	if !reflect.DeepEqual(e.Metadata, map[string]string{"field": "spec"}) {
		t.Errorf("metadata %v", e.Metadata)
	}
	want := []FieldViolation{
		{`spec.labels["Bad Key"]`, "a label key starts with a lowercase letter or a digit"},
		{"spec.quantization.scheme", "unknown quantization scheme 'w_int9_bogus'"},
	}
	if !reflect.DeepEqual(e.FieldViolations, want) {
		t.Errorf("violations %+v, want %+v", e.FieldViolations, want)
	}
	if !e.HasRetryDelay || e.RetryDelay != 1500*time.Millisecond {
		t.Errorf("retry delay %v (%v)", e.RetryDelay, e.HasRetryDelay)
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("status.Code %v", status.Code(err))
	}
	text := err.Error()
	for _, part := range []string{"INVALID_ARGUMENT: invalid request (2 violations) (reason INVALID_JOB_SPEC)",
		"\n  spec.quantization.scheme: unknown quantization scheme 'w_int9_bogus'"} {
		if !strings.Contains(text, part) {
			t.Errorf("%q lacks %q", text, part)
		}
	}
}

func TestErrorWithoutDetailsIsNamedByItsCode(t *testing.T) {
	e := AsError(status.Error(codes.NotFound, "no job jobs/x")).(*Error)
	if e.Reason != "NOT_FOUND" || e.Domain != "" || len(e.FieldViolations) != 0 || e.HasRetryDelay {
		t.Errorf("%+v", e)
	}
	if AsError(nil) != nil {
		t.Error("AsError(nil) is not nil")
	}
	if AsError(e) != error(e) {
		t.Error("AsError wraps an *Error again")
	}
}

func TestFromJobErrorReadsAFailedJobsStatus(t *testing.T) {
	e := FromJobError(refusal(t).Proto())
	if e.Code != codes.InvalidArgument || e.Reason != "INVALID_JOB_SPEC" || len(e.FieldViolations) != 2 {
		t.Errorf("%+v", e)
	}
	if FromJobError(nil) != nil {
		t.Error("FromJobError(nil) is not nil")
	}
}

func jobs(n int) []*pb.Job {
	var out []*pb.Job
	for i := 0; i < n; i++ {
		out = append(out, &pb.Job{Name: fmt.Sprintf("jobs/%d", i), State: pb.JobState_SUCCEEDED})
	}
	return out
}

// pager serves all in pages of the request's page size; the token is the
// next index.
func pager(all []*pb.Job, requests *[]*pb.ListJobsRequest) func(*pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
	return func(r *pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
		*requests = append(*requests, r)
		start := 0
		if r.PageToken != "" {
			start, _ = strconv.Atoi(r.PageToken)
		}
		end := start + int(r.PageSize)
		if end >= len(all) {
			return &pb.ListJobsResponse{Jobs: all[start:]}, nil
		}
		return &pb.ListJobsResponse{Jobs: all[start:end], NextPageToken: strconv.Itoa(end)}, nil
	}
}

func TestListFollowsPageTokens(t *testing.T) {
	var requests []*pb.ListJobsRequest
	f := &fakeService{listJobs: pager(jobs(5), &requests)}
	c := serve(t, f)
	q := ListQuery{
		States:   []pb.JobState{pb.JobState_SUCCEEDED, pb.JobState_FAILED},
		Labels:   map[string]string{"suite": "go"},
		OrderBy:  "create_time asc",
		PageSize: 2,
		View:     pb.JobView_FULL,
	}
	var sizes []int
	var names []string
	err := c.ListPages(context.Background(), q, func(page *pb.ListJobsResponse) error {
		sizes = append(sizes, len(page.Jobs))
		for _, j := range page.Jobs {
			names = append(names, j.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sizes, []int{2, 2, 1}) {
		t.Errorf("page sizes %v", sizes)
	}
	if !reflect.DeepEqual(names, []string{"jobs/0", "jobs/1", "jobs/2", "jobs/3", "jobs/4"}) {
		t.Errorf("names %v", names)
	}
	var tokens []string
	for _, r := range requests {
		tokens = append(tokens, r.PageToken)
		if r.PageSize != 2 || r.OrderBy != "create_time asc" || r.View != pb.JobView_FULL ||
			!reflect.DeepEqual(r.States, q.States) || !reflect.DeepEqual(r.Labels, q.Labels) {
			t.Errorf("request %v does not carry the query", r)
		}
	}
	if !reflect.DeepEqual(tokens, []string{"", "2", "4"}) {
		t.Errorf("page tokens %q", tokens)
	}

	// StopIteration ends the listing early and is not an error.
	requests = nil
	var seen []string
	err = c.List(context.Background(), q, func(j *pb.Job) error {
		seen = append(seen, j.Name)
		if len(seen) == 3 {
			return StopIteration
		}
		return nil
	})
	if err != nil || len(seen) != 3 || len(requests) != 2 {
		t.Errorf("stopped listing: err %v, %d jobs, %d requests", err, len(seen), len(requests))
	}
	// The callback's own error comes back as is.
	mine := errors.New("mine")
	if err := c.List(context.Background(), q, func(*pb.Job) error { return mine }); err != mine {
		t.Errorf("callback error %v", err)
	}
}

func TestListRefusesARepeatedPageToken(t *testing.T) {
	c := serve(t, &fakeService{listJobs: func(*pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
		return &pb.ListJobsResponse{Jobs: jobs(1), NextPageToken: "same"}, nil
	}})
	n := 0
	err := c.List(context.Background(), ListQuery{}, func(*pb.Job) error { n++; return nil })
	if err == nil || !strings.Contains(err.Error(), "twice") || n != 2 {
		t.Errorf("err %v after %d jobs", err, n)
	}
}

func event(seq int64, payload interface{}) *pb.JobEvent {
	e := &pb.JobEvent{Job: "jobs/w", Sequence: seq}
	switch p := payload.(type) {
	case pb.JobState:
		e.Payload = &pb.JobEvent_State{State: p}
	case float64:
		e.Payload = &pb.JobEvent_Progress{Progress: &pb.Progress{Percent: p}}
	}
	return e
}

func TestWaitResumesAfterUnavailableFromTheLastSequence(t *testing.T) {
	var afters []int64
	f := &fakeService{}
	f.watchJob = func(r *pb.WatchJobRequest, s pb.QuantizationService_WatchJobServer) error {
		afters = append(afters, r.AfterSequence)
		if r.Name != "jobs/w" {
			return status.Error(codes.NotFound, r.Name)
		}
		var events []*pb.JobEvent
		if len(afters) == 1 {
			events = []*pb.JobEvent{event(1, pb.JobState_RUNNING), event(2, 50.0), event(3, 75.0)}
		} else {
			// A replayed event 3 must not reach the callback twice.
			events = []*pb.JobEvent{event(3, 75.0), event(4, 100.0), event(5, pb.JobState_SUCCEEDED)}
		}
		for _, e := range events {
			if err := s.Send(e); err != nil {
				return err
			}
		}
		if len(afters) == 1 {
			return status.Error(codes.Unavailable, "frontend restarting")
		}
		return nil
	}
	f.getJob = func(_ context.Context, r *pb.GetJobRequest) (*pb.Job, error) {
		return &pb.Job{Name: r.Name, State: pb.JobState_SUCCEEDED}, nil
	}
	c := serve(t, f)
	var percents []float64
	job, err := c.Wait(context.Background(), "w", func(p *pb.Progress) { percents = append(percents, p.Percent) })
	if err != nil {
		t.Fatal(err)
	}
	if job.State != pb.JobState_SUCCEEDED || job.Name != "jobs/w" {
		t.Errorf("job %v", job)
	}
	if !reflect.DeepEqual(afters, []int64{0, 3}) {
		t.Errorf("after_sequence of the watches %v, want [0 3]", afters)
	}
	if !reflect.DeepEqual(percents, []float64{50, 75, 100}) {
		t.Errorf("progress %v", percents)
	}
}

func TestWatchEndsOnOtherErrorsAndAfterTheRetryWindow(t *testing.T) {
	f := &fakeService{watchJob: func(*pb.WatchJobRequest, pb.QuantizationService_WatchJobServer) error {
		return status.Error(codes.NotFound, "no such job")
	}}
	c := serve(t, f)
	_, err := c.Wait(context.Background(), "gone", nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != codes.NotFound || f.callCount("WatchJob") != 1 {
		t.Errorf("err %v after %d watches", err, f.callCount("WatchJob"))
	}

	unavailable := &fakeService{watchJob: func(*pb.WatchJobRequest, pb.QuantizationService_WatchJobServer) error {
		return status.Error(codes.Unavailable, "down")
	}}
	c = serve(t, unavailable, WithUnavailableRetry(1200*time.Millisecond))
	err = c.Watch(context.Background(), "w", 0, func(*pb.JobEvent) error { return nil })
	if status.Code(err) != codes.Unavailable {
		t.Errorf("err %v", err)
	}
	// Every 500ms for 1.2s: the first try and two or three retries.
	if n := unavailable.callCount("WatchJob"); n < 2 || n > 5 {
		t.Errorf("%d watches in the retry window", n)
	}
}

func TestContextDeadlinesEndEveryCall(t *testing.T) {
	f := &fakeService{
		watchJob: func(_ *pb.WatchJobRequest, s pb.QuantizationService_WatchJobServer) error {
			<-s.Context().Done() // a job that never ends
			return s.Context().Err()
		},
		getJob: func(context.Context, *pb.GetJobRequest) (*pb.Job, error) {
			return nil, status.Error(codes.Unavailable, "down")
		},
	}
	c := serve(t, f)
	for name, call := range map[string]func(context.Context) error{
		"Wait": func(ctx context.Context) error { _, err := c.Wait(ctx, "w", nil); return err },
		"Get":  func(ctx context.Context) error { _, err := c.Get(ctx, "w"); return err },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		err := call(ctx)
		cancel()
		// A ceiling for a hang: the retry window (60s) must not apply.
		if elapsed := time.Since(start); elapsed > 20*time.Second {
			t.Errorf("%s took %v", name, elapsed)
		}
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, context.DeadlineExceeded) ||
			e.Code != codes.DeadlineExceeded {
			t.Errorf("%s: %T %v, want an *Error wrapping context.DeadlineExceeded", name, err, err)
		}
	}
}

func TestUnaryCallsRetryUnavailableButCancelDoesNot(t *testing.T) {
	f := &fakeService{}
	f.getJob = func(_ context.Context, r *pb.GetJobRequest) (*pb.Job, error) {
		if f.callCount("GetJob") < 3 {
			return nil, status.Error(codes.Unavailable, "restarting")
		}
		return &pb.Job{Name: r.Name, State: pb.JobState_RUNNING}, nil
	}
	f.cancelJob = func(*pb.CancelJobRequest) (*pb.Job, error) {
		return nil, status.Error(codes.Unavailable, "restarting")
	}
	c := serve(t, f)
	job, err := c.Get(context.Background(), "jobs/r")
	if err != nil || job.Name != "jobs/r" || f.callCount("GetJob") != 3 {
		t.Errorf("Get: %v %v after %d calls", job, err, f.callCount("GetJob"))
	}
	if _, err := c.Cancel(context.Background(), "r"); status.Code(err) != codes.Unavailable || f.callCount("CancelJob") != 1 {
		t.Errorf("Cancel: %v after %d calls", err, f.callCount("CancelJob"))
	}
}

func TestSubmitSendsTheRequestIdAndTheToken(t *testing.T) {
	var got []*pb.CreateJobRequest
	var auth []string
	f := &fakeService{createJob: func(r *pb.CreateJobRequest) (*pb.Job, error) {
		got = append(got, r)
		return &pb.Job{Name: "jobs/1", State: pb.JobState_QUEUED, RequestId: r.RequestId}, nil
	}}
	f.getJob = func(ctx context.Context, r *pb.GetJobRequest) (*pb.Job, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		auth = md.Get("authorization")
		return &pb.Job{Name: r.Name}, nil
	}
	c := serve(t, f, WithToken("s3cret-token"))
	spec := &pb.JobSpec{ModelUri: "file:///m"}
	if _, err := c.Submit(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(context.Background(), spec, WithRequestID("mine-1"), ValidateOnly()); err != nil {
		t.Fatal(err)
	}
	if id := got[0].RequestId; !strings.HasPrefix(id, "go-") || len(id) != 3+32 || got[0].ValidateOnly {
		t.Errorf("default request %v", got[0])
	}
	if got[1].RequestId != "mine-1" || !got[1].ValidateOnly || got[1].Spec.ModelUri != "file:///m" {
		t.Errorf("request %v", got[1])
	}
	if _, err := c.Submit(context.Background(), nil); err == nil {
		t.Error("Submit(nil) succeeded")
	}
	if _, err := c.Get(context.Background(), "1"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(auth, []string{"Bearer s3cret-token"}) {
		t.Errorf("authorization %q", auth)
	}
}

func TestTokensStayOffPlaintextToOtherHosts(t *testing.T) {
	ctx := context.Background()
	for _, address := range []string{"10.1.2.3:50051", "quantd.example:50051", "dns:///quantd.example:443"} {
		if _, err := Dial(ctx, address, WithToken("t")); err == nil || !strings.Contains(err.Error(), "plaintext") {
			t.Errorf("Dial(%q) with a token over plaintext: %v", address, err)
		}
		c, err := Dial(ctx, address, WithToken("t"), WithPlaintextToken())
		if err != nil {
			t.Errorf("Dial(%q) with WithPlaintextToken: %v", address, err)
		} else {
			c.Close()
		}
		// Without a token plaintext is fine.
		if c, err := Dial(ctx, address); err != nil {
			t.Errorf("Dial(%q): %v", address, err)
		} else {
			c.Close()
		}
	}
	for _, address := range []string{"127.0.0.1:50051", "localhost:1", "[::1]:50051", "127.0.0.2:9", "unix:///run/quantd.sock"} {
		if !isLoopback(address) {
			t.Errorf("%q is loopback", address)
		}
	}
	for _, token := range []string{"has space", "new\nline", strings.Repeat("x", maxTokenBytes+1)} {
		if _, err := Dial(ctx, "127.0.0.1:1", WithToken(token)); err == nil {
			t.Errorf("token %.20q accepted", token)
		}
	}
}

func TestTLSFilesAreChecked(t *testing.T) {
	ctx := context.Background()
	if _, err := Dial(ctx, "127.0.0.1:1", WithTLS(TLSFiles{CertFile: "c.pem"})); err == nil {
		t.Error("a certificate without a key accepted")
	}
	if _, err := Dial(ctx, "127.0.0.1:1", WithTLS(TLSFiles{CAFile: "/nonexistent/ca.pem"})); err == nil {
		t.Error("a missing CA file accepted")
	}
	if _, err := Dial(ctx, "127.0.0.1:1", WithTLS(TLSFiles{CAFile: "/dev/null"})); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Errorf("an empty CA file: %v", err)
	}
	// A token with TLS may go anywhere.
	c, err := Dial(ctx, "quantd.example:443", WithToken("t"), WithTLS(TLSFiles{}))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestParseStateAndJobName(t *testing.T) {
	if s, err := ParseState("succeeded"); err != nil || s != pb.JobState_SUCCEEDED {
		t.Errorf("%v %v", s, err)
	}
	if _, err := ParseState("finished"); err == nil || !strings.Contains(err.Error(), "queued, running") {
		t.Errorf("%v", err)
	}
	if _, err := ParseState("JOB_STATE_UNSPECIFIED"); err == nil {
		t.Error("unspecified accepted")
	}
	if JobName("abc") != "jobs/abc" || JobName("jobs/abc") != "jobs/abc" {
		t.Error("JobName")
	}
}
