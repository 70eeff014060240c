"""Runs quantd and a worker as processes with what overlays/dev gives them.

The dev overlay is rendered with `kubectl kustomize`; the frontend and worker
containers' args and environment (ConfigMap values, Secret keys, $(VAR)
expansion, the worker image's `--server=$QUANTD_SERVER` entrypoint) become
command lines, with the pod paths mapped into a temporary directory and the
PostgreSQL host pointed at a throwaway local cluster. Then:
  * quantd serves TLS with the dev Secret's certificate: the frontend's
    readiness, liveness and startup probes, run as the rendered exec
    commands (quantd-health-probe with the dev CA), succeed, and a plaintext
    health check fails; /metrics on the annotated port (plaintext) reports
    the PostgreSQL store;
  * the worker authenticates over TLS (--tls-ca, the projected ca.crt) with
    the dev worker token against the dev token file (quantd_workers reaches
    1), and its startupProbe command succeeds;
  * KEDA's queue query runs on the schema quantd migrated;
  * on SIGTERM the frontend turns NOT_SERVING and exits 0 within
    --shutdown-grace.
"""

import argparse
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_check  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """A throwaway PostgreSQL cluster (as user postgres when run as root)."""

    def __init__(self, work):
        self.dir = os.path.join(work, "pg")
        os.makedirs(self.dir)
        self.bin = sorted(d for d in (os.path.join("/usr/lib/postgresql", v, "bin")
                                      for v in os.listdir("/usr/lib/postgresql"))
                          if os.path.exists(os.path.join(d, "initdb")))[-1]
        self.port = free_port()
        self.prefix = []
        if os.getuid() == 0:
            os.chown(self.dir, pwd.getpwnam("postgres").pw_uid, -1)
            # /usr/sbin is not on the test PATH.
            self.prefix = ["/usr/sbin/runuser", "-u", "postgres", "--"]

    def run(self, *args):
        subprocess.run(self.prefix + list(args), check=True, stdout=subprocess.DEVNULL)

    def start(self, user, password, database):
        pwfile = os.path.join(self.dir, "pw")
        with open(pwfile, "w") as f:
            f.write(password)
        os.chmod(pwfile, 0o644)
        self.run(self.bin + "/initdb", "-D", self.dir + "/data", "-U", user, "--auth=md5",
                 "--pwfile=" + pwfile)
        self.run(self.bin + "/pg_ctl", "-D", self.dir + "/data", "-w", "-l", self.dir + "/log",
                 "-o", "-p %d -k %s -c listen_addresses=127.0.0.1" % (self.port, self.dir), "start")
        env = dict(os.environ, PGPASSWORD=password)
        subprocess.run([self.bin + "/createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", user,
                        database], check=True, env=env)

    def query(self, sql, user, password, database):
        env = dict(os.environ, PGPASSWORD=password)
        return subprocess.run([self.bin + "/psql", "-h", "127.0.0.1", "-p", str(self.port), "-U",
                               user, "-d", database, "-At", "-c", sql], check=True, env=env,
                              stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()

    def stop(self):
        subprocess.run(self.prefix + [self.bin + "/pg_ctl", "-D", self.dir + "/data", "-m",
                                      "immediate", "stop"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


def secret_files(objects):
    """{(secret, key): decoded value} of the rendered Secrets."""
    import base64
    values = {}
    for s in deploy_check.by_kind(objects, "Secret"):
        for key, value in s.get("data", {}).items():
            values[(s["metadata"]["name"], key)] = base64.b64decode(value).decode()
    return values


def container_command(container, template, objects, secrets, entry_argv, remap, overrides):
    """argv and environment a container gets, with paths mapped by `remap`."""
    env = {}
    for src in container.get("envFrom", []):
        for cm in deploy_check.by_kind(objects, "ConfigMap"):
            if cm["metadata"]["name"] == src["configMapRef"]["name"]:
                env.update(cm["data"])
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
        elif "secretKeyRef" in e.get("valueFrom", {}):
            ref = e["valueFrom"]["secretKeyRef"]
            if (ref["name"], ref["key"]) in secrets or not ref.get("optional"):
                env[e["name"]] = secrets[(ref["name"], ref["key"])]
            # An optional key that is absent leaves the variable unset.
        elif "fieldRef" in e.get("valueFrom", {}):
            env[e["name"]] = "smoke-" + container["name"]
    env.update(overrides)
    args = [deploy_check.expand(a, env) for a in container.get("args", [])]
    fixed = [re.sub(r"\$(\w+)", lambda m: env[m.group(1)], w).strip('"') for w in entry_argv[1:]]
    argv = [remap(a) for a in fixed + args]
    env = {k: remap(v) for k, v in env.items()}
    return argv, env


# Waits below are on conditions; their ceilings only catch a hang, so they
# are generous: a loaded 2-core machine takes many times an idle one's time.
CEILING = 600


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


class DevOverlay:
    """overlays/dev rendered, its pods, images' entrypoints and Secret files
    laid out under a temporary root that stands for the pods' paths."""

    def __init__(self, repo):
        self.objects = deploy_check.render(repo, "deploy/k8s/overlays/dev")
        self.secrets = secret_files(self.objects)
        self.images = {}
        for file_name, image in deploy_check.DOCKERFILE_IMAGE.items():
            text = deploy_check.read(repo, "deploy/docker/" + file_name)
            _, stages = deploy_check.dockerfile_stages(deploy_check.parse_dockerfile(text))
            for keyword, rest in stages[-1].instructions:
                if keyword == "ENTRYPOINT":
                    self.images[image] = deploy_check.entrypoint_argv(
                        deploy_check.exec_form(rest))
        self.pods = {o["metadata"]["name"]: (o, t)
                     for o, t in deploy_check.pod_templates(self.objects)}

        # /tmp, not TEST_TMPDIR: the postgres user must reach the cluster directory.
        self.work = tempfile.mkdtemp(prefix="quantd-smoke-", dir="/tmp")
        os.chmod(self.work, 0o755)  # PostgreSQL runs as its own user below it
        self.root = os.path.join(self.work, "pod")
        for d in ("var/lib/quantd/artifacts", "models", "etc/quantd/auth", "etc/quantd/worker"):
            os.makedirs(os.path.join(self.root, d))

        # Secret volumes: files named by their keys (or by the volume's
        # items, which project only the keys they list) under the mount path.
        for name, (obj, tmpl) in self.pods.items():
            for c in tmpl["spec"]["containers"]:
                for m in c.get("volumeMounts", []):
                    vol = next((v for v in tmpl["spec"].get("volumes", [])
                                if v["name"] == m["name"]), {})
                    if "secret" in vol:
                        os.makedirs(self.remap(m["mountPath"]), exist_ok=True)
                        items = vol["secret"].get("items")
                        for (sname, key), value in self.secrets.items():
                            if sname != vol["secret"]["secretName"]:
                                continue
                            paths = [key] if items is None else [
                                i["path"] for i in items if i["key"] == key]
                            for path in paths:
                                with open(self.remap(m["mountPath"]) + "/" + path, "w") as f:
                                    f.write(value)
        self.pg = Postgres(self.work)
        self.pg_login = tuple(self.secrets[("quantd-postgres", k)]
                              for k in ("user", "password", "database"))

    def remap(self, value):
        """A pod path (or a flag / URI holding one) as a path under the root."""
        return re.sub(r"(^|[=,]|file://)/(var/lib/quantd|models|etc/quantd)",
                      lambda m: m.group(1) + self.root + "/" + m.group(2), value)

    def frontend(self, grpc_port, metrics_port, overrides=None):
        """quantd's argv and env, listening on the given ports of 127.0.0.1."""
        _, tmpl = self.pods["quantd"]
        c = tmpl["spec"]["containers"][0]
        argv, env = container_command(c, tmpl, self.objects, self.secrets, self.images["quantd"],
                                      self.remap, overrides or {})
        env.update(PGHOST="127.0.0.1", PGPORT=str(self.pg.port))
        # The pod's ports are taken on a shared host: move them, keeping
        # which flag carries which port.
        argv = [a.replace(":50051", ":%d" % grpc_port).replace(":9090", ":%d" % metrics_port)
                .replace("0.0.0.0", "127.0.0.1") for a in argv]
        return argv, env

    def worker(self, server, overrides=None):
        """quantd-worker's argv and env, dialing `server`."""
        _, tmpl = self.pods["quantd-worker"]
        c = tmpl["spec"]["containers"][0]
        return container_command(c, tmpl, self.objects, self.secrets,
                                 self.images["quantd-worker-cpu"], self.remap,
                                 dict(overrides or {}, QUANTD_SERVER=server))

    def probe(self, pod, probe_name, probe_binary, grpc_port=None):
        """The argv of a rendered exec probe of `pod`, run here: the image's
        quantd-health-probe replaced by `probe_binary`, pod paths mapped, and
        the frontend's port 50051 moved to `grpc_port` as frontend() does."""
        _, tmpl = self.pods[pod]
        command = tmpl["spec"]["containers"][0][probe_name]["exec"]["command"]
        argv = [self.remap(w.replace("/usr/local/bin/quantd-health-probe", probe_binary))
                for w in command]
        if grpc_port is not None:
            argv = [w.replace(":50051", ":%d" % grpc_port) for w in argv]
        return argv


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True)
    parser.add_argument("--binary", action="append", default=[])
    opts = parser.parse_args(argv)
    binaries = dict(b.split("=", 1) for b in opts.binary)
    dev = DevOverlay(opts.repo)
    objects, pods, work, pg = dev.objects, dev.pods, dev.work, dev.pg
    user, password, database = dev.pg_login
    procs = []
    failures = []
    try:
        pg.start(user, password, database)
        grpc_port, metrics_port = free_port(), free_port()
        fobj, ftmpl = pods["quantd"]
        fargv, fenv = dev.frontend(grpc_port, metrics_port)
        quantd_log = open(os.path.join(work, "quantd.log"), "w")
        quantd = subprocess.Popen([binaries["quantd"]] + fargv, env=fenv, stderr=quantd_log,
                                  stdout=quantd_log)
        procs.append(quantd)
        probe = binaries["quantd-health-probe"]
        # The probes are the rendered exec commands (TLS, the dev CA).
        ready_service = "readinessProbe"

        def serving(probe_name):
            return subprocess.run(dev.probe("quantd", probe_name, probe, grpc_port),
                                  stdout=subprocess.DEVNULL).returncode == 0

        wait_for(lambda: serving(ready_service) or quantd.poll() is not None, CEILING, "quantd")
        if quantd.poll() is not None:
            raise AssertionError("quantd exited: " + open(quantd_log.name).read())

        for probe_name in ("livenessProbe", "startupProbe"):
            if not serving(probe_name):
                failures.append("the frontend's %s fails" % probe_name)
        # The gRPC port speaks TLS only: a plaintext health check gets nothing.
        if subprocess.run([probe, "--addr=127.0.0.1:%d" % grpc_port],
                          stdout=subprocess.DEVNULL).returncode == 0:
            failures.append("quantd answers a plaintext health check")

        def metrics():
            return urllib.request.urlopen("http://127.0.0.1:%d%s" % (
                metrics_port, ftmpl["metadata"]["annotations"]["prometheus.io/path"]),
                timeout=60).read().decode()

        if 'quantd_build_info{store="postgresql"' not in metrics():
            failures.append("/metrics does not report the PostgreSQL store")

        wobj, wtmpl = pods["quantd-worker"]
        wc = wtmpl["spec"]["containers"][0]
        wargv, wenv = dev.worker("127.0.0.1:%d" % grpc_port)
        worker_log = open(os.path.join(work, "worker.log"), "w")
        worker = subprocess.Popen([binaries["quantd-worker"]] + wargv + ["--lease-wait-seconds=1"],
                                  env=wenv, stdout=worker_log, stderr=worker_log)
        procs.append(worker)
        wait_for(lambda: re.search(r"^quantd_workers 1$", metrics(), re.M) is not None or
                 worker.poll() is not None, CEILING, "the worker to call the frontend")
        if worker.poll() is not None:
            failures.append("the worker exited: " + open(worker_log.name).read())
        # The image installs the probe in /usr/local/bin.
        startup = dev.probe("quantd-worker", "startupProbe", probe)
        if subprocess.run(startup, env=dict(os.environ, **wenv)).returncode != 0:
            failures.append("the worker's startupProbe command fails")

        keda = [d for d in yaml.safe_load_all(open(os.path.join(
            opts.repo, "deploy/k8s/addons/keda/scaledobject.yaml"))) if d["kind"] == "ScaledObject"][0]
        count = pg.query(keda["spec"]["triggers"][0]["metadata"]["query"], user, password, database)
        if count != "0":
            failures.append("KEDA's query counts %r jobs on an empty store" % count)

        worker.send_signal(signal.SIGTERM)
        if worker.wait(timeout=CEILING) != 0:
            failures.append("the worker did not exit 0 on SIGTERM")
        quantd.send_signal(signal.SIGTERM)
        grace = deploy_check.flag_value(fargv, "shutdown_grace")
        seconds = float(re.match(r"(\d+)s$", grace).group(1))
        # The grace is quantd's own promise (a watchdog ends it), so this is
        # a bound on quantd, not on the machine; the margin covers the exit.
        try:
            code = quantd.wait(timeout=seconds + 10)
        except subprocess.TimeoutExpired:
            code = None
        if code != 0:
            failures.append("quantd exited %s on SIGTERM (grace %s)" % (code, grace))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        pg.stop()
    for f in failures:
        print("FAIL " + f)
    if failures:
        for log in ("quantd.log", "worker.log"):
            path = os.path.join(work, log)
            if os.path.exists(path):
                print("--- " + log + "\n" + open(path).read()[-3000:])
    else:
        shutil.rmtree(work, ignore_errors=True)
        print("ok: frontend and worker ran with overlays/dev's args, env and secrets")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
