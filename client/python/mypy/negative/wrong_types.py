# mypy must refuse the SDK called with the wrong types, and a job state
# compared with its name instead of the enum (always false at run time).
import quantd_client
from quantd_client import Client


def submit(client: Client) -> str:
    job = client.submit({"modelUri": "file:///m"}, request_id=7)  # expect: Argument "request_id" to "submit" of "Client" has incompatible type "int"
    if job.state == "SUCCEEDED":  # expect: Non-overlapping equality check
        return job.name
    for event in client.watch(job.name, after_sequence="3"):  # expect: Argument "after_sequence" to "watch" of "Client" has incompatible type "str"
        print(event.progress.percent.upper())  # expect: "float" has no attribute "upper"
    return quantd_client.JobState.Name(job.state)
