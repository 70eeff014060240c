#!/usr/bin/python3
"""Quantizes the bundled stories260K model with quantd and prints the result.

    client/python/generate.sh            # once: the protobuf modules
    PYTHONPATH=client/python client/python/examples/quantize_stories.py \
        --server 127.0.0.1:50051 --eval-windows 20

Progress goes to stderr; the summary (or, with --json, the final job as proto3
JSON on one line) to stdout. Exit status: 0 SUCCEEDED, 1 the job FAILED or was
CANCELLED, 3 quantd refused the request.
"""

import argparse
import os
import sys

from google.protobuf import json_format

import quantd_client
from quantd_client import Client, QuantdError, TlsOptions

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


def file_uri(path: str) -> str:
    return path if "://" in path else "file://" + os.path.abspath(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=os.environ.get("QUANTD_SERVER", "127.0.0.1:50051"))
    parser.add_argument("--token", default=os.environ.get("QUANTD_TOKEN"))
    parser.add_argument("--tls-ca", help="PEM CA bundle; turns TLS on")
    parser.add_argument("--tls-cert", help="client certificate (mTLS)")
    parser.add_argument("--tls-key", help="key of --tls-cert")
    parser.add_argument("--model", default=os.path.join(REPO, "models", "stories260K"))
    parser.add_argument("--scheme", default="w_int8_per_channel_sym")
    parser.add_argument(
        "--eval", default=os.path.join(REPO, "tests", "data", "tinystories-sample.txt")
    )
    parser.add_argument("--eval-windows", type=int, default=20)
    parser.add_argument("--output", help="artifact directory (default: quantd's data dir)")
    parser.add_argument("--label", action="append", default=[], help="KEY=VALUE")
    parser.add_argument("--json", action="store_true", help="print the final job as JSON")
    args = parser.parse_args()

    tls = None
    if args.tls_ca or args.tls_cert:
        tls = TlsOptions(ca_file=args.tls_ca, cert_file=args.tls_cert, key_file=args.tls_key)
    spec = quantd_client.JobSpec(
        model_uri=file_uri(args.model),
        quantization=quantd_client.QuantizationSettings(scheme=args.scheme),
        evaluation=quantd_client.EvaluationSpec(
            dataset_uri=file_uri(args.eval), n_ctx=256, max_windows=args.eval_windows
        ),
        labels=dict(kv.split("=", 1) for kv in args.label),
    )
    if args.output:
        spec.export.output_uri = file_uri(args.output)

    def show_progress(p: quantd_client.Progress) -> None:
        stage = quantd_client.Stage.Name(p.stage).lower()
        block = f" block {p.block}/{p.block_count}" if p.block else ""
        print(f"[{p.percent:5.1f}%] {stage}{block} {p.message}", file=sys.stderr)

    try:
        with Client(args.server, token=args.token, tls=tls) as client:
            job = client.submit(spec)
            print(f"submitted {job.name}", file=sys.stderr)
            job = client.wait(job.name, on_progress=show_progress)
    except QuantdError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3

    if args.json:
        print(json_format.MessageToJson(job, indent=None))
    else:
        m = job.result.metrics
        print(f"{job.name}: {quantd_client.JobState.Name(job.state)}")
        if m.HasField("float_perplexity"):
            print(f"perplexity float:     {m.float_perplexity.perplexity:.4f}")
            print(f"perplexity quantized: {m.quantized_perplexity.perplexity:.4f}")
        for artifact in job.result.artifacts:
            print(f"artifact: {artifact.uri} ({artifact.bytes} bytes)")
        if job.state != quantd_client.JobState.Value("SUCCEEDED"):
            print(f"error: {QuantdError.from_job_error(job.error)}", file=sys.stderr)
    return 0 if job.state == quantd_client.JobState.Value("SUCCEEDED") else 1


if __name__ == "__main__":
    sys.exit(main())
