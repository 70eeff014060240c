"""The deployment as a local cluster of processes, killed and restarted under load.

PostgreSQL, two quantd frontends and three workers run as processes with the
args, environment and secrets overlays/dev gives their pods (the lease
duration shortened from the ConfigMap's 60 s to 20 s, so that the killed
worker's job is re-leased soon while a heartbeat delayed by a loaded machine
still renews the lease). 30 jobs are submitted through the Python SDK, and meanwhile:
  * a worker gets SIGTERM mid-job (a pod drain): it finishes that job and
    exits 0, and its replacement starts;
  * another is killed with SIGKILL while its job is evaluating: the job is
    re-leased when its lease expires and run again by another worker (each
    worker has its own scratch directory, as each pod has its own ephemeral
    scratch volume, so the new attempt starts over);
  * a frontend is restarted (SIGTERM, then started again on its port).
Every job must end SUCCEEDED exactly once, with artifacts byte-identical to
each other (all 30 jobs have one spec).

Nothing here has a time budget: every wait is on a condition, and only a
hang reaches its ceiling (a job takes ~90 s on a loaded 2-core machine, a
second on an idle one). The jobs' wait fails only when none of them has moved
(state, attempt, stage, block, percent) for STALL_CEILING seconds.

A real Prometheus (Debian's) scrapes both frontends with the job of
deploy/prometheus/scrape-config.yaml, its relabelling unchanged; only the
Kubernetes pod discovery is replaced by a file listing the two frontends with
the labels that discovery would give their pods (the prometheus.io/*
annotations of the rendered quantd pod template). Through its HTTP API the
test checks that both frontends are up under their pod names, that the queue
depth was seen above 0 while jobs waited and is 0 at the end on both, and
that the finished-jobs counters it holds equal the frontends' own /metrics.

TLS is on as in the overlay: the frontends serve the dev Secret's
certificate, the workers verify it with its ca.crt, the Python SDK connects
with TlsOptions(ca_file=that ca.crt), and a frontend counts as up when its
rendered readiness probe (quantd-health-probe over TLS) passes; Prometheus
scrapes the plaintext metrics port.
"""

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import yaml

from manifest_smoke import DevOverlay, free_port, wait_for

JOBS = 30
CEILING = 600  # seconds; a ceiling on one condition, reached only by a hang
STALL_CEILING = 600  # seconds without any job moving
LEASE_DURATION = "20s"
ADMIN_TOKEN = "dev-admin-token-not-for-production"  # overlays/dev/secrets/auth-tokens


def wait_all(client, names, terminal):
    """Every job's final Job, once all are in `terminal` states. Fails only
    when no job moved for STALL_CEILING seconds: however slow the machine,
    a cluster that works keeps moving."""
    last = None
    moved = time.monotonic()
    while True:
        jobs = [client.get(name) for name in names]
        if all(j.state in terminal for j in jobs):
            return jobs
        seen = [(j.state, j.attempt, j.progress.stage, j.progress.block,
                 int(j.progress.percent)) for j in jobs]
        if seen != last:
            last, moved = seen, time.monotonic()
        elif time.monotonic() - moved > STALL_CEILING:
            stuck = ["%s %s" % (j.name, j.state) for j in jobs if j.state not in terminal]
            raise AssertionError("no job moved for %d s; not finished: %s" % (
                STALL_CEILING, ", ".join(stuck)))
        time.sleep(1)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Prometheus:
    """Debian's prometheus scraping the frontends every second with the
    shipped scrape job, pod discovery swapped for a file of targets."""

    def __init__(self, repo, work, frontends, annotations):
        if shutil.which("prometheus") is None:
            raise AssertionError("prometheus is missing; run tools/install_deps.sh")
        with open(os.path.join(repo, "deploy/prometheus/scrape-config.yaml")) as f:
            shipped = yaml.safe_load(f)
        job = shipped["scrape_configs"][0]
        assert "kubernetes_sd_configs" in job, "the shipped job discovers pods"
        del job["kubernetes_sd_configs"]
        targets = os.path.join(work, "prometheus-targets.json")
        job["file_sd_configs"] = [{"files": [targets], "refresh_interval": "1s"}]
        job["scrape_interval"] = "1s"
        job["scrape_timeout"] = "900ms"
        groups = []
        for pod, metrics_port in frontends:
            # What pod discovery gives a frontend pod: its address (the pod
            # IP, no port), namespace, name and annotations; the metrics port
            # is this host's, as each local frontend has its own.
            labels = {"__meta_kubernetes_namespace": "quantd",
                      "__meta_kubernetes_pod_name": pod}
            for key, value in annotations.items():
                if key.startswith("prometheus.io/"):
                    name = "__meta_kubernetes_pod_annotation_" + key.replace(".", "_").replace("/", "_")
                    labels[name] = str(metrics_port) if key == "prometheus.io/port" else value
            groups.append({"targets": ["127.0.0.1"], "labels": labels})
        with open(targets, "w") as f:
            json.dump(groups, f)
        config = os.path.join(work, "prometheus.yml")
        with open(config, "w") as f:
            yaml.safe_dump({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                            "scrape_configs": [job]}, f)
        self.port = free_port()
        self.log = open(os.path.join(work, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            ["prometheus", "--config.file=" + config,
             "--storage.tsdb.path=" + os.path.join(work, "prometheus-data"),
             "--web.listen-address=127.0.0.1:%d" % self.port], stdout=self.log, stderr=self.log)
        wait_for(lambda: self.ready(), CEILING, "prometheus")

    def ready(self):
        try:
            return urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % self.port,
                                          timeout=2).status == 200
        except OSError:
            return False

    def query(self, promql):
        """{pod: value} of an instant vector query."""
        url = "http://127.0.0.1:%d/api/v1/query?query=%s" % (self.port,
                                                            urllib.parse.quote(promql))
        body = json.loads(urllib.request.urlopen(url, timeout=60).read().decode())
        if body.get("status") != "success":
            raise AssertionError("prometheus query %s: %s" % (promql, body))
        return {r["metric"].get("pod", ""): float(r["value"][1])
                for r in body["data"]["result"]}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=CEILING)


def scrape(metrics_port, name):
    """Sum of a metric's samples on one frontend's /metrics."""
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % metrics_port,
                                  timeout=60).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True)
    parser.add_argument("--binary", action="append", default=[])
    parser.add_argument("--sdk", required=True, help="directory holding quantd_client")
    parser.add_argument("--model", required=True)
    parser.add_argument("--eval-text", required=True)
    opts = parser.parse_args(argv)
    binaries = dict(b.split("=", 1) for b in opts.binary)
    sys.path.insert(0, opts.sdk)
    import quantd_client  # noqa: E402

    dev = DevOverlay(opts.repo)
    models = os.path.join(dev.root, "models")
    shutil.copytree(opts.model, os.path.join(models, "stories260K"))
    shutil.copy(opts.eval_text, os.path.join(models, "eval.txt"))
    procs = {}
    logs = []

    def start(name, argv, env):
        log = open(os.path.join(dev.work, name + ".log"), "a")
        logs.append(log.name)
        procs[name] = subprocess.Popen(argv, env=env, stdout=log, stderr=log)

    failures = []
    prometheus = None
    try:
        dev.pg.start(*dev.pg_login)
        ports = [(free_port(), free_port()) for _ in range(2)]
        frontends = [dev.frontend(g, m, {"QUANTD_LEASE_DURATION": LEASE_DURATION})
                     for g, m in ports]
        for i, (fargv, fenv) in enumerate(frontends):
            start("quantd-%d" % i, [binaries["quantd"]] + fargv, fenv)
        probe = binaries["quantd-health-probe"]
        for g, _ in ports:
            wait_for(lambda: subprocess.run(dev.probe("quantd", "readinessProbe", probe, g),
                                            stdout=subprocess.DEVNULL).returncode == 0,
                     CEILING, "frontend on port %d" % g)
        addresses = ["127.0.0.1:%d" % g for g, _ in ports]
        pods = [("quantd-%d" % i, m) for i, (_, m) in enumerate(ports)]
        prometheus = Prometheus(opts.repo, dev.work, pods,
                                dev.pods["quantd"][1]["metadata"]["annotations"])
        wait_for(lambda: prometheus.query('up{job="quantd"}') ==
                 {"quantd-0": 1.0, "quantd-1": 1.0}, CEILING,
                 "prometheus to scrape both frontends")

        shared = os.path.join(dev.root, "var/lib/quantd")

        def start_worker(name, frontend):
            # The pod's own scratch (/var/lib/quantd, ephemeral) with the
            # shared artifacts volume mounted at /var/lib/quantd/artifacts.
            pod = os.path.join(dev.work, name, "var/lib/quantd")
            os.makedirs(pod)
            os.symlink(os.path.join(shared, "artifacts"), os.path.join(pod, "artifacts"))
            wargv, wenv = dev.worker(addresses[frontend], {"POD_NAME": name})
            wargv = [a.replace(shared, pod) for a in wargv]
            wenv = {k: v.replace(shared, pod) for k, v in wenv.items()}
            # The artifacts volume's real path is outside the pod directory.
            wargv = [a + "," + os.path.join(shared, "artifacts") if a.startswith("--allowed-roots=")
                     else a for a in wargv]
            start(name, [binaries["quantd-worker"]] + wargv + ["--lease-wait-seconds=1"], wenv)

        # Two workers on frontend 0, one on frontend 1.
        for i, f in enumerate([0, 0, 1]):
            start_worker("worker-%d" % i, f)

        # TLS as a client outside the cluster sees it: the dev CA, and the
        # address dialed (127.0.0.1) is a name the dev certificate carries.
        client = quantd_client.Client(addresses[0], token=ADMIN_TOKEN, tls=quantd_client.TlsOptions(
            ca_file=os.path.join(dev.root, "etc/quantd/tls/ca.crt")))
        spec = {
            "modelUri": "file://" + os.path.join(models, "stories260K"),
            "quantization": {"scheme": "w_int8_per_channel_sym"},
            "evaluation": {"datasetUri": "file://" + os.path.join(models, "eval.txt"),
                           "maxWindows": 30},
        }
        names = [client.submit(spec).name for _ in range(JOBS)]
        # Three workers, 30 jobs: the queue is deep for a while.
        seen_depth = []
        wait_for(lambda: seen_depth.append(prometheus.query(
            'max(quantd_queue_depth{job="quantd"})').get("", 0)) or seen_depth[-1] > 0, CEILING,
            "prometheus to see queued jobs")

        stage = quantd_client.Stage.Value

        def job_of(worker):
            for name in names:
                job = client.get(name)
                if job.state == quantd_client.JobState.Value("RUNNING") and job.worker == worker:
                    return job
            return None

        # 1. Drain worker-0 mid-job.
        drained = []
        wait_for(lambda: drained.append(job_of("worker-0")) or drained[-1] is not None, CEILING,
                 "worker-0 to run a job")
        procs["worker-0"].send_signal(signal.SIGTERM)
        code = procs["worker-0"].wait(timeout=CEILING)
        if code != 0:
            failures.append("worker-0 exited %d after SIGTERM (drain)" % code)
        job = client.get(drained[-1].name)
        if job.state != quantd_client.JobState.Value("SUCCEEDED") or job.attempt != 1:
            failures.append("the drained worker's job %s is %s, attempt %d" % (
                job.name, quantd_client.JobState.Name(job.state), job.attempt))
        start_worker("worker-3", 0)

        # 2. kill -9 worker-1 while its job is evaluating.
        late = []
        wait_for(lambda: late.append(job_of("worker-1")) or (
            late[-1] is not None and late[-1].progress.stage == stage("EVALUATE")), CEILING,
            "worker-1 to evaluate a job")
        procs["worker-1"].kill()
        procs["worker-1"].wait()
        killed_job = late[-1].name
        start_worker("worker-4", 0)

        # 3. Restart frontend 1 (worker-2 dials it).
        procs["quantd-1"].send_signal(signal.SIGTERM)
        code = procs["quantd-1"].wait(timeout=CEILING)
        if code != 0:
            # The code tells a watchdog exit (1, "shutdown did not finish
            # within --shutdown-grace" in its log) from a signal (negative).
            failures.append("frontend 1 did not exit 0 on SIGTERM (exit %d)" % code)
        start("quantd-1", [binaries["quantd"]] + frontends[1][0], frontends[1][1])

        try:
            jobs = wait_all(client, names, {quantd_client.JobState.Value(s) for s in
                                            ("SUCCEEDED", "FAILED", "CANCELLED")})
        except AssertionError as e:
            failures.append(str(e))
            jobs = [client.get(name) for name in names]
        shas = set()
        for job in jobs:
            if job.state != quantd_client.JobState.Value("SUCCEEDED"):
                failures.append("%s ended %s: %s" % (job.name,
                                                     quantd_client.JobState.Name(job.state),
                                                     job.error.message))
                continue
            if len(job.result.artifacts) != 1:
                failures.append("%s has %d artifacts" % (job.name, len(job.result.artifacts)))
                continue
            path = job.result.artifacts[0].uri[len("file://"):] + "/model.safetensors"
            shas.add(sha256(path))
            succeeded = sum(1 for e in client.watch(job.name)
                            if e.WhichOneof("payload") == "state"
                            and e.state == quantd_client.JobState.Value("SUCCEEDED"))
            if succeeded != 1:
                failures.append("%s has %d SUCCEEDED events" % (job.name, succeeded))
        if len(shas) != 1:
            failures.append("artifacts differ across jobs: %d distinct model.safetensors" %
                            len(shas))
        # Prometheus against the frontends: both up under their pod names, the
        # queue empty on both, and its finished counters what they report.
        want = {pod: scrape(m, "quantd_jobs_finished_total") for pod, m in pods}
        got = {}
        try:
            wait_for(lambda: got.update(prometheus.query(
                'sum by (pod) (quantd_jobs_finished_total{job="quantd",namespace="quantd"})'))
                or got == want, CEILING, "prometheus to catch up with the frontends' counters")
        except AssertionError:
            failures.append("prometheus has finished counters %s, the frontends %s" % (got, want))
        # A scrape that timed out on a loaded machine reads up 0 until the
        # next one: wait for the condition rather than sample it once.
        depth, up = {}, {}
        try:
            wait_for(lambda: depth.update(prometheus.query('quantd_queue_depth{job="quantd"}'))
                     or depth == {"quantd-0": 0.0, "quantd-1": 0.0}, CEILING,
                     "prometheus to see both queues empty")
        except AssertionError:
            failures.append("prometheus queue depth at the end: %s" % depth)
        try:
            wait_for(lambda: up.update(prometheus.query('up{job="quantd"}'))
                     or up == {"quantd-0": 1.0, "quantd-1": 1.0}, CEILING,
                     "prometheus to scrape both frontends")
        except AssertionError:
            failures.append("prometheus targets: %s" % up)
        print("prometheus: queue depth seen at %d while jobs waited; finished counters %s; "
              "queue depth at the end %s" % (max(seen_depth), got, depth))

        killed = client.get(killed_job)
        if killed.attempt < 2 or killed.worker == "worker-1":
            failures.append("the killed worker's job %s: attempt %d on %s" % (
                killed_job, killed.attempt, killed.worker))
        attempts = sum(j.attempt for j in jobs)
        print("%d jobs SUCCEEDED, %d attempts in all; drained %s (attempt 1), killed %s "
              "(attempt %d, on %s)" % (sum(j.state == quantd_client.JobState.Value("SUCCEEDED")
                                              for j in jobs), attempts, drained[-1].name,
                                          killed_job, killed.attempt, killed.worker))
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
        if prometheus is not None:
            prometheus.stop()
            logs.append(prometheus.log.name)
        dev.pg.stop()
    for f in failures:
        print("FAIL " + f)
    if failures:
        for log in logs:
            print("--- " + log + "\n" + open(log).read()[-2000:])
        return 1
    shutil.rmtree(dev.work, ignore_errors=True)
    print("ok: local cluster of 2 frontends and 3 workers ran %d jobs through drain, kill -9 "
          "and a frontend restart" % JOBS)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
