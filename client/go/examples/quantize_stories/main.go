// Command quantize_stories quantizes the bundled stories260K model with
// quantd and prints the result.
//
//	client/go/offline.sh go run ./examples/quantize_stories \
//	    --server 127.0.0.1:50051 --model "$PWD/models/stories260K" --eval-windows 20
//
// Progress goes to stderr; the summary (or, with --json, the final job as
// proto3 JSON on one line) to stdout. Exit status: 0 SUCCEEDED, 1 the job
// FAILED or was CANCELLED, 2 bad flags, 3 quantd refused a request.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	pb "github.com/quantd/quantd/client/go/gen/quantd/v1"
	"github.com/quantd/quantd/client/go/quantd"
	"google.golang.org/protobuf/encoding/protojson"
)

type labels map[string]string

func (l labels) String() string { return fmt.Sprint(map[string]string(l)) }

func (l labels) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", kv)
	}
	l[k] = v
	return nil
}

func fileURI(path string) string {
	if strings.Contains(path, "://") {
		return path
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return "file://" + path
}

func main() {
	os.Exit(run())
}

func run() int {
	server := flag.String("server", envOr("QUANTD_SERVER", "127.0.0.1:50051"), "quantd's gRPC address")
	token := flag.String("token", os.Getenv("QUANTD_TOKEN"), "bearer token")
	tlsCA := flag.String("tls-ca", "", "PEM CA bundle; turns TLS on")
	tlsCert := flag.String("tls-cert", "", "client certificate (mTLS)")
	tlsKey := flag.String("tls-key", "", "key of --tls-cert")
	model := flag.String("model", "models/stories260K", "model directory or URI")
	scheme := flag.String("scheme", "w_int8_per_channel_sym", "quantization preset")
	eval := flag.String("eval", "tests/data/tinystories-sample.txt", "evaluation text file or URI")
	evalWindows := flag.Int("eval-windows", 20, "evaluation windows of 256 tokens (0: all)")
	output := flag.String("output", "", "artifact directory (default: quantd's data dir)")
	jobLabels := labels{}
	flag.Var(jobLabels, "label", "KEY=VALUE job label (repeatable)")
	asJSON := flag.Bool("json", false, "print the final job as JSON")
	flag.Parse()
	if flag.NArg() != 0 || *evalWindows < 0 || *evalWindows > 1<<30 {
		flag.Usage()
		return 2
	}

	var opts []quantd.Option
	if *token != "" {
		opts = append(opts, quantd.WithToken(*token))
	}
	if *tlsCA != "" || *tlsCert != "" {
		opts = append(opts, quantd.WithTLS(quantd.TLSFiles{CAFile: *tlsCA, CertFile: *tlsCert, KeyFile: *tlsKey}))
	}
	spec := &pb.JobSpec{
		ModelUri:     fileURI(*model),
		Quantization: &pb.QuantizationSettings{Source: &pb.QuantizationSettings_Scheme{Scheme: *scheme}},
		Evaluation: &pb.EvaluationSpec{
			DatasetUri: fileURI(*eval),
			NCtx:       proto32(256),
			MaxWindows: int32(*evalWindows),
		},
		Labels: jobLabels,
	}
	if *output != "" {
		spec.Export = &pb.ExportSpec{OutputUri: fileURI(*output)}
	}

	ctx := context.Background()
	client, err := quantd.Dial(ctx, *server, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 2
	}
	defer client.Close()
	job, err := client.Submit(ctx, spec)
	if err == nil {
		fmt.Fprintf(os.Stderr, "submitted %s\n", job.GetName())
		job, err = client.Wait(ctx, job.GetName(), showProgress)
	}
	if err != nil {
		var qe *quantd.Error
		if errors.As(err, &qe) {
			fmt.Fprintln(os.Stderr, "error:", qe)
			return 3
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}

	if *asJSON {
		out, err := protojson.Marshal(job)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			return 1
		}
		fmt.Println(string(out))
	} else {
		m := job.GetResult().GetMetrics()
		fmt.Printf("%s: %s\n", job.GetName(), job.GetState())
		if m.GetFloatPerplexity() != nil {
			fmt.Printf("perplexity float:     %.4f\n", m.GetFloatPerplexity().GetPerplexity())
			fmt.Printf("perplexity quantized: %.4f\n", m.GetQuantizedPerplexity().GetPerplexity())
		}
		for _, a := range job.GetResult().GetArtifacts() {
			fmt.Printf("artifact: %s (%d bytes)\n", a.GetUri(), a.GetBytes())
		}
	}
	if job.GetState() != pb.JobState_SUCCEEDED {
		if e := quantd.FromJobError(job.GetError()); e != nil {
			fmt.Fprintln(os.Stderr, "error:", e)
		}
		return 1
	}
	return 0
}

func showProgress(p *pb.Progress) {
	stage := strings.ToLower(p.GetStage().String())
	block := ""
	if p.GetBlock() != 0 {
		block = fmt.Sprintf(" block %d/%d", p.GetBlock(), p.GetBlockCount())
	}
	fmt.Fprintf(os.Stderr, "[%5.1f%%] %s%s %s\n", p.GetPercent(), stage, block, p.GetMessage())
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func proto32(v int32) *int32 { return &v }
