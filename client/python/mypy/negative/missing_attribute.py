# mypy must refuse reading a field a message does not have, deep in a Job.
import quantd_client


def perplexity(job: quantd_client.Job) -> float:
    return job.result.metrics.float_perplexity.perplexty  # expect: "PerplexityResult" has no attribute "perplexty"
