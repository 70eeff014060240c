#!/usr/bin/python3
"""Runs the SDK scenario (tests/sdk/SCENARIO.md) with the Python SDK.

    PYTHONPATH=client/python client/python/examples/sdk_scenario.py \
        --server 127.0.0.1:50051 --model models/stories260K \
        --eval tests/data/tinystories-sample.txt --output-dir /tmp/scenario --run r1

Progress goes to stderr; the transcript (one JSON object) to stdout. The
TypeScript and Go clients and the HTTP face run the same scenario, and
//tests/sdk:cross_client_scenario_test compares their transcripts.
"""

import argparse
import json
import os
import sys
from typing import Any, Dict

import quantd_client
from quantd_client import Client, QuantdError


def state_name(state: int) -> str:
    return quantd_client.JobState.Name(state)


def job_spec(args: argparse.Namespace, role: str) -> dict:
    return {
        "modelUri": "file://" + os.path.abspath(args.model),
        "quantization": {"scheme": "w_int8_per_channel_sym"},
        "evaluation": {
            "datasetUri": "file://" + os.path.abspath(args.eval),
            "nCtx": 256,
            "maxWindows": 4,
        },
        "export": {"outputUri": "file://" + os.path.join(os.path.abspath(args.output_dir), role)},
        "labels": {"sdk-scenario": args.run, "role": role},
    }


def refused(client: Client, args: argparse.Namespace) -> dict:
    spec = {
        "modelUri": "file://" + os.path.abspath(args.model),
        "quantization": {"scheme": "w_int9_bogus"},
        "labels": {"Bad Key": "x"},
    }
    try:
        job = client.submit(spec, request_id=f"{args.run}-refused")
    except QuantdError as e:
        return {
            "code": e.code.name,
            "reason": e.reason,
            "field_violations": [
                {"field": v.field, "description": v.description} for v in e.field_violations
            ],
        }
    raise SystemExit(f"quantd accepted the bad spec as {job.name}")


def watch(client: Client, name: str) -> dict:
    states, sequences = [], []
    counts = {"block_metrics": 0, "result": 0}
    last_percent = None
    for event in client.watch(name):
        sequences.append(event.sequence)
        kind = event.WhichOneof("payload")
        if kind == "state":
            states.append(state_name(event.state))
        elif kind == "progress":
            last_percent = event.progress.percent
            p = event.progress
            print(f"[{p.percent:5.1f}%] {quantd_client.Stage.Name(p.stage).lower()}", file=sys.stderr)
        elif kind in counts:
            counts[kind] += 1
    return {
        "states": states,
        "block_metrics": counts["block_metrics"],
        "results": counts["result"],
        "progress_last_percent": None if last_percent is None else f"{last_percent:.1f}",
        "sequences_contiguous": sequences == list(range(1, len(sequences) + 1)),
    }


def result(job: quantd_client.Job) -> dict:
    m = job.result.metrics
    (artifact,) = job.result.artifacts
    return {
        "state": state_name(job.state),
        "float_perplexity": f"{m.float_perplexity.perplexity:.4f}",
        "quantized_perplexity": f"{m.quantized_perplexity.perplexity:.4f}",
        "eval_windows": m.quantized_perplexity.protocol.windows,
        "eval_tokens": m.quantized_perplexity.protocol.tokens,
        "blocks": len(m.blocks),
        "artifact_accepted": artifact.accepted,
        "artifact_files": [
            {"path": f.path, "bytes": f.bytes, "sha256": f.sha256}
            for f in sorted(artifact.files, key=lambda f: f.path)
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--eval", required=True)
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--token")
    args = parser.parse_args()

    transcript: Dict[str, Any] = {}
    with Client(args.server, token=args.token) as client:
        transcript["refused"] = refused(client, args)
        a = client.submit(job_spec(args, "a"), request_id=f"{args.run}-a")
        transcript["submitted_state"] = state_name(a.state)
        b = client.submit(job_spec(args, "b"), request_id=f"{args.run}-b")
        transcript["cancelled_state"] = state_name(client.cancel(b.name).state)
        print(f"submitted {a.name}, cancelled {b.name}", file=sys.stderr)
        transcript["watch"] = watch(client, a.name)
        transcript["result"] = result(client.get(a.name))
        pages = list(client.list_pages(labels={"sdk-scenario": args.run}, page_size=1))
        jobs = [j for page in pages for j in page.jobs]
        transcript["list"] = {
            "page_sizes": [len(page.jobs) for page in pages],
            "roles": [j.spec.labels["role"] for j in jobs],
            "states": [state_name(j.state) for j in jobs],
        }
    print(json.dumps(transcript, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
