// Package quantd is a client of quantd, the quantization service: submit,
// wait for, inspect, list and cancel jobs over quantd's gRPC API
// (quantd.v1, generated into package quantdv1).
//
//	c, err := quantd.Dial(ctx, "127.0.0.1:50051", quantd.WithToken(os.Getenv("QUANTD_TOKEN")))
//	job, err := c.Submit(ctx, &quantdv1.JobSpec{
//		ModelUri:     "file:///models/llama",
//		Quantization: &quantdv1.QuantizationSettings{Source: &quantdv1.QuantizationSettings_Scheme{Scheme: "w_int4_per_group_sym"}},
//	})
//	job, err = c.Wait(ctx, job.Name, func(p *quantdv1.Progress) { log.Printf("%.1f%%", p.Percent) })
//
// Every method honours its context's deadline and cancellation and returns
// the errors quantd sends as *Error, with the google.rpc details. Job names
// may be given as "jobs/<id>" or the bare id.
package quantd

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	pb "github.com/quantd/quantd/client/go/gen/quantd/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// TLSFiles are PEM files for TLS. Without CAFile the system roots verify the
// server; CertFile and KeyFile present a client certificate (mTLS).
type TLSFiles struct {
	CAFile   string
	CertFile string
	KeyFile  string
	// Name to verify the server certificate against instead of the address.
	ServerName string
}

type settings struct {
	token               string
	allowPlaintextToken bool
	tlsFiles            *TLSFiles
	tlsConfig           *tls.Config
	callTimeout         time.Duration
	retryWindow         time.Duration
	maxReceiveBytes     int
	dialOptions         []grpc.DialOption
}

// Option configures Dial.
type Option func(*settings)

// WithToken sends "authorization: Bearer <token>" on every call. Over
// plaintext Dial refuses it unless the address is loopback (or
// WithPlaintextToken allows it): anyone on the path could read it.
func WithToken(token string) Option { return func(s *settings) { s.token = token } }

// WithPlaintextToken allows WithToken on a plaintext connection to a
// non-loopback address (a trusted network, a sidecar proxy).
func WithPlaintextToken() Option { return func(s *settings) { s.allowPlaintextToken = true } }

// WithTLS turns TLS (or mTLS) on with PEM files.
func WithTLS(files TLSFiles) Option { return func(s *settings) { f := files; s.tlsFiles = &f } }

// WithTLSConfig turns TLS on with a crypto/tls configuration; it wins over
// WithTLS.
func WithTLSConfig(config *tls.Config) Option { return func(s *settings) { s.tlsConfig = config } }

// WithCallTimeout bounds each attempt of a unary call (default 30s; 0: only
// the context's deadline).
func WithCallTimeout(d time.Duration) Option { return func(s *settings) { s.callTimeout = d } }

// WithUnavailableRetry sets how long Submit, Get, List, Watch and Wait keep
// retrying while quantd is UNAVAILABLE (a restart, a failover). Default 60s;
// 0 turns retries off. Cancel is never retried.
func WithUnavailableRetry(d time.Duration) Option { return func(s *settings) { s.retryWindow = d } }

// WithMaxReceiveBytes caps one response message (default 16 MiB; ListJobs
// pages stay under about 3 MiB).
func WithMaxReceiveBytes(n int) Option { return func(s *settings) { s.maxReceiveBytes = n } }

// WithDialOptions passes extra options to grpc.DialContext.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(s *settings) { s.dialOptions = append(s.dialOptions, opts...) }
}

// Client is a connection to one quantd frontend. It is safe for concurrent
// use.
type Client struct {
	conn *grpc.ClientConn
	stub pb.QuantizationServiceClient
	s    settings
}

// maxPEMBytes bounds the TLS files read: PEM bundles are kilobytes.
const maxPEMBytes = 1 << 20

// maxTokenBytes bounds a bearer token (a header value).
const maxTokenBytes = 8 << 10

// Dial connects to quantd at address ("host:port"). The connection is made
// lazily; ctx bounds the dial itself when WithDialOptions adds
// grpc.WithBlock.
func Dial(ctx context.Context, address string, opts ...Option) (*Client, error) {
	s := settings{callTimeout: 30 * time.Second, retryWindow: 60 * time.Second, maxReceiveBytes: 16 << 20}
	for _, o := range opts {
		o(&s)
	}
	if address == "" {
		return nil, errors.New("quantd: empty server address")
	}
	if s.callTimeout < 0 || s.retryWindow < 0 || s.maxReceiveBytes <= 0 {
		return nil, errors.New("quantd: negative call timeout or retry window, or non-positive receive limit")
	}
	tlsConfig, err := s.tls()
	if err != nil {
		return nil, err
	}
	dialOpts := []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.ForceCodec(codec{}), grpc.MaxCallRecvMsgSize(s.maxReceiveBytes)),
	}
	if tlsConfig != nil {
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)))
	} else {
		dialOpts = append(dialOpts, grpc.WithInsecure())
	}
	if s.token != "" {
		if err := checkToken(s.token); err != nil {
			return nil, err
		}
		if tlsConfig == nil && !s.allowPlaintextToken && !isLoopback(address) {
			return nil, fmt.Errorf("quantd: refusing to send a bearer token over plaintext to %q: use TLS, or WithPlaintextToken on a trusted network", address)
		}
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(bearer(s.token)))
	}
	dialOpts = append(dialOpts, s.dialOptions...)
	conn, err := grpc.DialContext(ctx, address, dialOpts...)
	if err != nil {
		return nil, asError(ctx, err)
	}
	return &Client{conn: conn, stub: pb.NewQuantizationServiceClient(conn), s: s}, nil
}

func (s *settings) tls() (*tls.Config, error) {
	if s.tlsConfig != nil {
		return s.tlsConfig, nil
	}
	if s.tlsFiles == nil {
		return nil, nil
	}
	f := s.tlsFiles
	config := &tls.Config{ServerName: f.ServerName, MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		pem, err := readPEM(f.CAFile)
		if err != nil {
			return nil, err
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("quantd: no PEM certificate in %s", f.CAFile)
		}
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("quantd: a client certificate needs both CertFile and KeyFile")
	}
	if f.CertFile != "" {
		certPEM, err := readPEM(f.CertFile)
		if err != nil {
			return nil, err
		}
		keyPEM, err := readPEM(f.KeyFile)
		if err != nil {
			return nil, err
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("quantd: client certificate %s / %s: %w", f.CertFile, f.KeyFile, err)
		}
		config.Certificates = []tls.Certificate{cert}
	}
	return config, nil
}

func readPEM(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("quantd: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPEMBytes+1))
	if err != nil {
		return nil, fmt.Errorf("quantd: reading %s: %w", path, err)
	}
	if len(data) > maxPEMBytes {
		return nil, fmt.Errorf("quantd: %s is larger than %d bytes; not a PEM file", path, maxPEMBytes)
	}
	return data, nil
}

// checkToken refuses what cannot be a header value (control characters
// would split or corrupt the request's headers).
func checkToken(token string) error {
	if len(token) > maxTokenBytes {
		return fmt.Errorf("quantd: bearer token longer than %d bytes", maxTokenBytes)
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] > '~' {
			return fmt.Errorf("quantd: bearer token has a space or non-printable byte at offset %d", i)
		}
	}
	return nil
}

// isLoopback: a Unix socket, "localhost", or a loopback IP literal. Names
// other than localhost may resolve anywhere, so they are not loopback.
func isLoopback(address string) bool {
	if strings.HasPrefix(address, "unix:") || strings.HasPrefix(address, "unix-abstract:") {
		return true
	}
	address = strings.TrimPrefix(address, "passthrough:///")
	address = strings.TrimPrefix(address, "dns:///")
	host := address
	if h, _, err := net.SplitHostPort(address); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bearer is the per-RPC credential. Dial has decided whether plaintext is
// acceptable, so it does not ask gRPC for transport security (gRPC would
// refuse loopback plaintext too).
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Service is the generated gRPC client, for calls this package does not wrap.
func (c *Client) Service() pb.QuantizationServiceClient { return c.stub }

// JobName is "jobs/<id>" for a job name or a bare id.
func JobName(name string) string {
	if strings.HasPrefix(name, "jobs/") {
		return name
	}
	return "jobs/" + name
}

// ParseState is a JobState from its name in any case ("succeeded").
func ParseState(name string) (pb.JobState, error) {
	if v, ok := pb.JobState_value[strings.ToUpper(name)]; ok && v != 0 {
		return pb.JobState(v), nil
	}
	var names []string
	for v := int32(1); ; v++ {
		n, ok := pb.JobState_name[v]
		if !ok {
			break
		}
		names = append(names, strings.ToLower(n))
	}
	return 0, fmt.Errorf("quantd: unknown job state %q; one of %s", name, strings.Join(names, ", "))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// contextError is the *Error of a call that ended because ctx did.
func contextError(ctx context.Context) error {
	return asError(ctx, status.Error(contextCode(ctx.Err()), ctx.Err().Error()))
}

// unary runs call, retrying while quantd is UNAVAILABLE (when retry is set)
// with backoff, for at most the retry window.
func (c *Client) unary(ctx context.Context, retry bool, call func(context.Context) error) error {
	deadline := time.Now().Add(c.s.retryWindow)
	delay := 250 * time.Millisecond
	for {
		attempt, cancel := ctx, context.CancelFunc(func() {})
		if c.s.callTimeout > 0 {
			attempt, cancel = context.WithTimeout(ctx, c.s.callTimeout)
		}
		err := call(attempt)
		cancel()
		if err == nil {
			return nil
		}
		if retry && status.Code(err) == codes.Unavailable && ctx.Err() == nil &&
			time.Now().Add(delay).Before(deadline) {
			if sleep(ctx, delay) != nil {
				return contextError(ctx)
			}
			if delay *= 2; delay > 2*time.Second {
				delay = 2 * time.Second
			}
			continue
		}
		return asError(ctx, err)
	}
}

// SubmitOption sets a field of the CreateJob request.
type SubmitOption func(*pb.CreateJobRequest)

// WithRequestID sets the idempotency key (at most 128 characters): a retry
// with the same spec returns the stored job; a reuse with another spec is
// ALREADY_EXISTS (REQUEST_ID_REUSED).
func WithRequestID(id string) SubmitOption { return func(r *pb.CreateJobRequest) { r.RequestId = id } }

// ValidateOnly asks quantd to validate the spec and store nothing.
func ValidateOnly() SubmitOption { return func(r *pb.CreateJobRequest) { r.ValidateOnly = true } }

// Submit creates a job. Without WithRequestID a random request id is used,
// so the retries Submit makes while quantd is unavailable never create a
// second job.
func (c *Client) Submit(ctx context.Context, spec *pb.JobSpec, opts ...SubmitOption) (*pb.Job, error) {
	if spec == nil {
		return nil, errors.New("quantd: Submit needs a JobSpec")
	}
	req := &pb.CreateJobRequest{Spec: spec}
	for _, o := range opts {
		o(req)
	}
	if req.RequestId == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("quantd: request id: %w", err)
		}
		req.RequestId = "go-" + hex.EncodeToString(b[:])
	}
	var job *pb.Job
	err := c.unary(ctx, true, func(ctx context.Context) (err error) {
		job, err = c.stub.CreateJob(ctx, req)
		return err
	})
	return job, err
}

// Get returns the whole job.
func (c *Client) Get(ctx context.Context, name string) (*pb.Job, error) {
	var job *pb.Job
	err := c.unary(ctx, true, func(ctx context.Context) (err error) {
		job, err = c.stub.GetJob(ctx, &pb.GetJobRequest{Name: JobName(name)})
		return err
	})
	return job, err
}

// Cancel cancels a job: a QUEUED one ends CANCELLED, a RUNNING one goes to
// CANCELLING. A finished job is FAILED_PRECONDITION (JOB_ALREADY_FINISHED).
func (c *Client) Cancel(ctx context.Context, name string) (*pb.Job, error) {
	var job *pb.Job
	err := c.unary(ctx, false, func(ctx context.Context) (err error) {
		job, err = c.stub.CancelJob(ctx, &pb.CancelJobRequest{Name: JobName(name)})
		return err
	})
	return job, err
}

// ListQuery selects the jobs List returns.
type ListQuery struct {
	// Only jobs in these states (any state when empty).
	States []pb.JobState
	// Only jobs carrying all of these labels.
	Labels map[string]string
	// "create_time desc" (the default) or "create_time asc".
	OrderBy string
	// Jobs per page; 0: the server's default (50).
	PageSize int32
	// BASIC (the default: no quantization config content, no per-block
	// metrics) or FULL.
	View pb.JobView
}

// StopIteration, returned by a List, ListPages or Watch callback, ends the
// iteration without an error.
var StopIteration = errors.New("quantd: stop iteration")

// ListPages calls fn with each page of matching jobs, following
// next_page_token until the last page.
func (c *Client) ListPages(ctx context.Context, q ListQuery, fn func(*pb.ListJobsResponse) error) error {
	req := &pb.ListJobsRequest{
		PageSize: q.PageSize,
		States:   q.States,
		Labels:   q.Labels,
		OrderBy:  q.OrderBy,
		View:     q.View,
	}
	seen := map[string]bool{}
	for {
		var page *pb.ListJobsResponse
		err := c.unary(ctx, true, func(ctx context.Context) (err error) {
			page, err = c.stub.ListJobs(ctx, req)
			return err
		})
		if err != nil {
			return err
		}
		if err := fn(page); err != nil {
			if errors.Is(err, StopIteration) {
				return nil
			}
			return err
		}
		token := page.GetNextPageToken()
		if token == "" {
			return nil
		}
		// A token seen before would loop forever.
		if seen[token] {
			return fmt.Errorf("quantd: ListJobs returned page token %q twice", token)
		}
		seen[token] = true
		req.PageToken = token
	}
}

// List calls fn with every matching job, fetching pages as it goes.
func (c *Client) List(ctx context.Context, q ListQuery, fn func(*pb.Job) error) error {
	return c.ListPages(ctx, q, func(page *pb.ListJobsResponse) error {
		for _, job := range page.GetJobs() {
			if err := fn(job); err != nil {
				return err
			}
		}
		return nil
	})
}

// Watch calls fn with the job's events after afterSequence, live until the
// job ends, and returns nil when the stream does. When the stream breaks
// with UNAVAILABLE (quantd restarting, a frontend failing over) it is
// reopened after the last event received, for up to the retry window, so no
// event is lost or repeated.
func (c *Client) Watch(ctx context.Context, name string, afterSequence int64, fn func(*pb.JobEvent) error) error {
	req := &pb.WatchJobRequest{Name: JobName(name), AfterSequence: afterSequence}
	var retryUntil time.Time
	for {
		err := c.watchOnce(ctx, req, fn, &retryUntil)
		var fnErr callbackError
		if errors.As(err, &fnErr) {
			if errors.Is(fnErr.err, StopIteration) {
				return nil
			}
			return fnErr.err
		}
		if err == nil {
			return nil
		}
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return asError(ctx, err)
		}
		now := time.Now()
		if retryUntil.IsZero() {
			retryUntil = now.Add(c.s.retryWindow)
		}
		if !now.Before(retryUntil) {
			return asError(ctx, err)
		}
		if sleep(ctx, 500*time.Millisecond) != nil {
			return contextError(ctx)
		}
	}
}

// watchOnce follows one WatchJob stream, advancing req.AfterSequence.
func (c *Client) watchOnce(ctx context.Context, req *pb.WatchJobRequest, fn func(*pb.JobEvent) error, retryUntil *time.Time) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.stub.WatchJob(ctx, req)
	if err != nil {
		return err
	}
	for {
		event, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if event.GetSequence() <= req.AfterSequence {
			continue // a replayed event: fn has had it
		}
		req.AfterSequence = event.GetSequence()
		*retryUntil = time.Time{}
		if err := fn(event); err != nil {
			return callbackError{err}
		}
	}
}

// callbackError marks fn's error so that Watch returns it unchanged.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }
func (e callbackError) Unwrap() error { return e.err }

// Wait follows the job with WatchJob until it ends and returns it (as Get
// does). onProgress, when not nil, gets each Progress update. The job may
// have ended FAILED or CANCELLED: check job.State (FromJobError turns
// job.Error into an *Error).
func (c *Client) Wait(ctx context.Context, name string, onProgress func(*pb.Progress)) (*pb.Job, error) {
	err := c.Watch(ctx, name, 0, func(event *pb.JobEvent) error {
		if p := event.GetProgress(); p != nil && onProgress != nil {
			onProgress(p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, name)
}
