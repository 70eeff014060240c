package quantd_test

import (
	"context"
	"errors"
	"log"
	"os"

	quantdv1 "github.com/quantd/quantd/client/go/gen/quantd/v1"
	"github.com/quantd/quantd/client/go/quantd"
)

// The README's quickstart; compiled by go vet and go test, not run (it needs
// a quantd).
func Example() {
	ctx := context.Background()
	c, err := quantd.Dial(ctx, "127.0.0.1:50051", quantd.WithToken(os.Getenv("QUANTD_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	job, err := c.Submit(ctx, &quantdv1.JobSpec{
		ModelUri: "file:///models/llama",
		Quantization: &quantdv1.QuantizationSettings{
			Source: &quantdv1.QuantizationSettings_Scheme{Scheme: "w_int4_per_group_sym"},
		},
	})
	if err == nil {
		job, err = c.Wait(ctx, job.Name, func(p *quantdv1.Progress) {
			log.Printf("%5.1f%% %s", p.Percent, p.Message)
		})
	}
	var qe *quantd.Error
	if errors.As(err, &qe) {
		log.Fatalf("%s (%s): %v", quantd.CodeName(qe.Code), qe.Reason, qe.FieldViolations)
	} else if err != nil {
		log.Fatal(err)
	}
	log.Printf("%s: %s", job.GetName(), job.GetState())
}

// Jobs of one run, newest first, a page at a time.
func ExampleClient_List() {
	c, err := quantd.Dial(context.Background(), "127.0.0.1:50051")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	q := quantd.ListQuery{Labels: map[string]string{"run": "r1"}, States: []quantdv1.JobState{quantdv1.JobState_SUCCEEDED}, PageSize: 20}
	err = c.List(context.Background(), q, func(job *quantdv1.Job) error {
		log.Println(job.Name, job.Result.GetMetrics().GetQuantizedPerplexity().GetPerplexity())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
