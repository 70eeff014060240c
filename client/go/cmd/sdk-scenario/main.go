// Command sdk-scenario runs the SDK scenario of tests/sdk/SCENARIO.md with
// the Go client against a live quantd and prints its transcript (one JSON
// object) on stdout; progress goes to stderr.
//
//	sdk-scenario --server 127.0.0.1:50051 --model models/stories260K \
//	    --eval tests/data/tinystories-sample.txt --output-dir /tmp/out --run r1
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	pb "github.com/quantd/quantd/client/go/gen/quantd/v1"
	"github.com/quantd/quantd/client/go/quantd"
	"google.golang.org/grpc/codes"
)

type violation struct {
	Field       string `json:"field"`
	Description string `json:"description"`
}

type refused struct {
	Code            string      `json:"code"`
	Reason          string      `json:"reason"`
	FieldViolations []violation `json:"field_violations"`
}

type watch struct {
	States              []string `json:"states"`
	BlockMetrics        int      `json:"block_metrics"`
	Results             int      `json:"results"`
	ProgressLastPercent *string  `json:"progress_last_percent"` // null without progress
	SequencesContiguous bool     `json:"sequences_contiguous"`
}

type artifactFile struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	Sha256 string `json:"sha256"`
}

type result struct {
	State               string         `json:"state"`
	FloatPerplexity     string         `json:"float_perplexity"`
	QuantizedPerplexity string         `json:"quantized_perplexity"`
	EvalWindows         int32          `json:"eval_windows"`
	EvalTokens          int64          `json:"eval_tokens"`
	Blocks              int            `json:"blocks"`
	ArtifactAccepted    bool           `json:"artifact_accepted"`
	ArtifactFiles       []artifactFile `json:"artifact_files"`
}

type list struct {
	PageSizes []int    `json:"page_sizes"`
	Roles     []string `json:"roles"`
	States    []string `json:"states"`
}

type transcript struct {
	Refused        refused `json:"refused"`
	SubmittedState string  `json:"submitted_state"`
	CancelledState string  `json:"cancelled_state"`
	Watch          watch   `json:"watch"`
	Result         result  `json:"result"`
	List           list    `json:"list"`
}

func main() {
	server := flag.String("server", "127.0.0.1:50051", "quantd's gRPC address")
	model := flag.String("model", "", "the stories260K directory")
	eval := flag.String("eval", "", "the evaluation text")
	outputDir := flag.String("output-dir", "", "artifacts go to DIR/a and DIR/b")
	run := flag.String("run", "", "the sdk-scenario label of this run's jobs")
	token := flag.String("token", "", "bearer token")
	flag.Parse()
	if *model == "" || *eval == "" || *outputDir == "" || *run == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: sdk-scenario --server HOST:PORT --model DIR --eval FILE --output-dir DIR --run ID [--token TOKEN]")
		os.Exit(2)
	}
	t, err := scenario(context.Background(), *server, *token, abs(*model), abs(*eval), abs(*outputDir), *run)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sdk-scenario:", err)
		os.Exit(1)
	}
	out, err := json.Marshal(t)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sdk-scenario:", err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}

func abs(path string) string {
	p, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	return p
}

func jobSpec(model, eval, output, run, role string) *pb.JobSpec {
	return &pb.JobSpec{
		ModelUri:     "file://" + model,
		Quantization: &pb.QuantizationSettings{Source: &pb.QuantizationSettings_Scheme{Scheme: "w_int8_per_channel_sym"}},
		Evaluation: &pb.EvaluationSpec{
			DatasetUri: "file://" + eval,
			NCtx:       int32Ptr(256),
			MaxWindows: 4,
		},
		Export: &pb.ExportSpec{OutputUri: "file://" + output},
		Labels: map[string]string{"sdk-scenario": run, "role": role},
	}
}

func int32Ptr(v int32) *int32 { return &v }

func scenario(ctx context.Context, server, token, model, eval, outputDir, run string) (*transcript, error) {
	var opts []quantd.Option
	if token != "" {
		opts = append(opts, quantd.WithToken(token))
	}
	client, err := quantd.Dial(ctx, server, opts...)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	t := &transcript{}

	// 1. A refused request: its code, reason and field violations.
	bad := &pb.JobSpec{
		ModelUri:     "file://" + model,
		Quantization: &pb.QuantizationSettings{Source: &pb.QuantizationSettings_Scheme{Scheme: "w_int9_bogus"}},
		Labels:       map[string]string{"Bad Key": "x"},
	}
	t.Refused.FieldViolations = []violation{}
	if job, err := client.Submit(ctx, bad, quantd.WithRequestID(run+"-refused")); err == nil {
		// Recorded as OK so that the transcript shows the difference; the
		// stray job is cancelled.
		t.Refused.Code = quantd.CodeName(codes.OK)
		if _, err := client.Cancel(ctx, job.GetName()); err != nil {
			return nil, err
		}
	} else {
		var qe *quantd.Error
		if !errors.As(err, &qe) {
			return nil, err
		}
		t.Refused.Code, t.Refused.Reason = quantd.CodeName(qe.Code), qe.Reason
		for _, v := range qe.FieldViolations {
			t.Refused.FieldViolations = append(t.Refused.FieldViolations, violation{v.Field, v.Description})
		}
	}
	fmt.Fprintf(os.Stderr, "refused: %s %s\n", t.Refused.Code, t.Refused.Reason)

	// 2. Job A; 3. job B, cancelled while queued.
	a, err := client.Submit(ctx, jobSpec(model, eval, filepath.Join(outputDir, "a"), run, "a"), quantd.WithRequestID(run+"-a"))
	if err != nil {
		return nil, err
	}
	t.SubmittedState = a.GetState().String()
	b, err := client.Submit(ctx, jobSpec(model, eval, filepath.Join(outputDir, "b"), run, "b"), quantd.WithRequestID(run+"-b"))
	if err != nil {
		return nil, err
	}
	cancelled, err := client.Cancel(ctx, b.GetName())
	if err != nil {
		return nil, err
	}
	t.CancelledState = cancelled.GetState().String()
	fmt.Fprintf(os.Stderr, "submitted %s (%s); %s %s\n", a.GetName(), t.SubmittedState, b.GetName(), t.CancelledState)

	// 4. Watch A to its end.
	t.Watch.States = []string{}
	t.Watch.SequencesContiguous = true
	var expected int64 = 1
	err = client.Watch(ctx, a.GetName(), 0, func(e *pb.JobEvent) error {
		if e.GetSequence() != expected {
			t.Watch.SequencesContiguous = false
		}
		expected = e.GetSequence() + 1
		switch p := e.GetPayload().(type) {
		case *pb.JobEvent_State:
			t.Watch.States = append(t.Watch.States, p.State.String())
		case *pb.JobEvent_Progress:
			percent := fmt.Sprintf("%.1f", p.Progress.GetPercent())
			t.Watch.ProgressLastPercent = &percent
			fmt.Fprintf(os.Stderr, "[%5.1f%%] %s\n", p.Progress.GetPercent(), p.Progress.GetMessage())
		case *pb.JobEvent_BlockMetrics:
			t.Watch.BlockMetrics++
		case *pb.JobEvent_Result:
			t.Watch.Results++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	// 5. Get A.
	job, err := client.Get(ctx, a.GetName())
	if err != nil {
		return nil, err
	}
	m := job.GetResult().GetMetrics()
	t.Result = result{
		State:               job.GetState().String(),
		FloatPerplexity:     fmt.Sprintf("%.4f", m.GetFloatPerplexity().GetPerplexity()),
		QuantizedPerplexity: fmt.Sprintf("%.4f", m.GetQuantizedPerplexity().GetPerplexity()),
		EvalWindows:         m.GetQuantizedPerplexity().GetProtocol().GetWindows(),
		EvalTokens:          m.GetQuantizedPerplexity().GetProtocol().GetTokens(),
		Blocks:              len(m.GetBlocks()),
		ArtifactFiles:       []artifactFile{},
	}
	if artifacts := job.GetResult().GetArtifacts(); len(artifacts) > 0 {
		t.Result.ArtifactAccepted = artifacts[0].GetAccepted()
		for _, f := range artifacts[0].GetFiles() {
			t.Result.ArtifactFiles = append(t.Result.ArtifactFiles, artifactFile{f.GetPath(), f.GetBytes(), f.GetSha256()})
		}
		sort.Slice(t.Result.ArtifactFiles, func(i, j int) bool {
			return t.Result.ArtifactFiles[i].Path < t.Result.ArtifactFiles[j].Path
		})
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", job.GetName(), t.Result.State)

	// 6. List this run's jobs one per page, newest first.
	t.List = list{PageSizes: []int{}, Roles: []string{}, States: []string{}}
	query := quantd.ListQuery{Labels: map[string]string{"sdk-scenario": run}, PageSize: 1}
	err = client.ListPages(ctx, query, func(page *pb.ListJobsResponse) error {
		t.List.PageSizes = append(t.List.PageSizes, len(page.GetJobs()))
		for _, j := range page.GetJobs() {
			t.List.Roles = append(t.List.Roles, j.GetSpec().GetLabels()["role"])
			t.List.States = append(t.List.States, j.GetState().String())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}
