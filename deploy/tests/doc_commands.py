#!/usr/bin/env python3
"""Every command docs/deploy.md and deploy/README.md tell a platform team to
run is checked here against what it acts on.

The commands are read from the ```sh blocks (continuation lines joined,
comments dropped) and from inline `kubectl ...` spans of the prose. Each is
matched to a checker below; a command no checker knows fails the test, so a
new command in the docs needs a check before it lands. What "checked" means
per command:

  deploy/docker/build.sh ARGS        runs with --dry-run and the same ARGS
  docker run ... IMAGE ARGS          IMAGE is one build.sh makes; ARGS are
                                     flags of that image's binary; -e names
                                     an ENV of its Dockerfile; -p ports are
                                     the ones the args listen on
  kubectl kustomize / apply -k DIR   DIR renders
  kubectl create namespace NS        every namespaced object renders into NS
  kubectl create secret generic N    the manifests read N, and every key they
                                     read from it is created
  kubectl rollout|logs deployment/N  Deployment N exists in NS
  kubectl port-forward service/N P:Q Service N exposes port Q
  kubectl get secret N ... {.data.K} N is a documented secret with key K
  kubectl get persistentvolumeclaim/N  the workers or frontends mount claim N
  kubectl label namespace X K=V      a NetworkPolicy admits namespaces K=V
  kind create cluster / load IMAGE   IMAGE is one build.sh makes
  python3 client/python/...py ARGS   the script accepts ARGS (--help)
  bazel test TARGETS                 the targets exist in deploy/ BUILD files
  openssl / printf / echo / rm ...   the token snippet runs as written, and
                                     quantd starts with the tokens file it
                                     writes (--auth-tokens)
  openssl req|x509, printf > tls.ext the TLS snippets run as written, in
                                     order, in one directory; each leaves a
                                     tls.crt that chains to ca.crt, matches
                                     tls.key and names every name the
                                     manifests dial, and quantd serves TLS
                                     with it (quantd-health-probe verifies
                                     each name, refuses another)

usage: doc_commands.py --repo DIR --binary NAME=PATH ... --sdk DIR
"""

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_check as dc  # noqa: E402

DOCS = ["docs/deploy.md", "deploy/README.md"]
OVERLAY = "deploy/k8s/overlays/nvidia"
# Shell plumbing of the token snippet: run as a whole by check_token_snippet.
SHELL_WORDS = {"openssl", "printf", "echo", "rm", "{", "}", "WORKER_TOKEN=", "ADMIN_TOKEN=",
               "NEW_TOKEN="}


def doc_commands(text):
    """[(line number, command)] from ```sh blocks and inline kubectl spans."""
    out = []
    lines = text.split("\n")
    in_sh = False
    pending, start = "", 0
    for i, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_sh = line.strip() == "```sh" and not in_sh
            continue
        if in_sh:
            body = line.rstrip()
            if not pending:
                start = i
            if body.endswith("\\"):
                pending += body[:-1] + " "
                continue
            cmd = re.sub(r"\s+#.*$", "", pending + body).strip()
            pending = ""
            if cmd and not cmd.startswith("#"):
                out.append((start, cmd))
        else:
            # `kubectl kustomize` or `kubectl create secret` name a tool or a step;
    # a command to run has its arguments.
            for m in re.finditer(r"`(kubectl [^`]+)`", line):
                if len(m.group(1).split()) >= 4:
                    out.append((i, m.group(1)))
    return out


def segments(cmd):
    """A command line split at &&, | and & into argv lists (env prefixes
    kept; a redirection ends its segment's argv)."""
    lex = shlex.shlex(cmd, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    out, argv, redirected = [], [], False
    for tok in lex:
        if tok in ("&&", "|", "&", ";"):
            if argv:
                out.append(argv)
            argv, redirected = [], False
        elif tok in (">", ">>", "<"):
            redirected = True
        elif not redirected:
            argv.append(tok)
    if argv:
        out.append(argv)
    return out


class Context:
    def __init__(self, repo, binaries, sdk):
        self.repo = repo
        self.sdk = sdk
        self.binaries = binaries
        self.flags = {n: dc.binary_flags(p) for n, p in binaries.items()}
        self.version = dc.quantd_version(repo)
        self.objects = dc.render(repo, OVERLAY)
        self.namespace = next(o["metadata"]["namespace"] for o in self.objects
                              if o["kind"] == "Deployment")
        self.built_images = self._built_images()
        self.addons = {}
        self.documented_secrets = {}
        for doc in DOCS:
            for name, keys in dc.documented_secrets(dc.read(repo, doc)).items():
                self.documented_secrets.setdefault(name, set()).update(keys)

    def _built_images(self):
        r = subprocess.run(["bash", os.path.join(self.repo, "deploy/docker/build.sh"), "--dry-run",
                            "quantd", "worker-cpu", "worker-cuda", "worker-rocm"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, cwd=self.repo,
                           env=dict(os.environ, LIBTORCH_CUDA_SHA256="0" * 64))
        return set(re.findall(r"(?:-t|--tag)[ =](\S+)", r.stdout))

    def addon(self, name):
        if name not in self.addons:
            self.addons[name] = dc.render(self.repo, "deploy/k8s/addons/" + name)
        return self.addons[name]

    def named(self, kind, name):
        return [o for o in self.objects
                if o["kind"] == kind and o["metadata"]["name"] == name]

    def secret_refs(self):
        """{secret name: set of keys the pods read} (secretKeyRef keys,
        projected items, files that args and probes name in a mounted
        Secret); KEDA's secretRef reads the Secret whole."""
        refs = dc.secret_keys_read(self.objects)
        for m in re.finditer(r"'secretRef': \{'name': '([^']+)'", repr(self.objects)):
            refs.setdefault(m.group(1), set())
        return refs


def leaf_paths(tree, prefix=()):
    """Key paths to the leaves of a JSON object."""
    if not isinstance(tree, dict):
        return [prefix]
    return [p for k, v in tree.items() for p in leaf_paths(v, prefix + (k,))]


def kubectl_args(argv):
    """(namespace, remaining args) of a kubectl argv."""
    ns, rest = None, []
    i = 1
    while i < len(argv):
        if argv[i] in ("-n", "--namespace"):
            ns = argv[i + 1]
            i += 2
            continue
        if argv[i].startswith("--namespace="):
            ns = argv[i].split("=", 1)[1]
        else:
            rest.append(argv[i])
        i += 1
    return ns, rest


def check_kubectl(ctx, argv, p, where):
    ns, a = kubectl_args(argv)
    if ns is not None and ns != ctx.namespace:
        p.add(where, "namespace %s, but the manifests deploy into %s" % (ns, ctx.namespace))
    verb = a[0] if a else ""
    if verb == "kustomize" or (verb == "apply" and "-k" in a):
        target = a[a.index("-k") + 1] if "-k" in a else a[1]
        try:
            dc.render(ctx.repo, target)
        except RuntimeError as e:
            p.add(where, str(e))
        return True
    if verb == "apply" and a[1:] == ["-f", "-"]:
        return True  # applies what the previous segment printed
    if verb == "create" and a[1] == "namespace":
        bad = [o["metadata"]["name"] for o in ctx.objects
               if "namespace" in o["metadata"] and o["metadata"]["namespace"] != a[2]]
        if bad:
            p.add(where, "objects outside namespace %s: %s" % (a[2], bad))
        return True
    if verb == "create" and a[1:3] == ["secret", "generic"]:
        name = a[3]
        keys = set(re.findall(r"--from-(?:literal|file)=([A-Za-z0-9_.-]+)=", " ".join(a)))
        read = ctx.secret_refs().get(name)
        if read is None:
            p.add(where, "no manifest reads secret %s" % name)
        else:
            missing = read - keys
            if missing:
                p.add(where, "the manifests read %s from %s, which this command does not create"
                      % (sorted(missing), name))
        return True
    if verb == "patch":
        kind, name = a[1], a[2]
        patch = json.loads(a[a.index("-p") + 1])
        objs = [o for o in ctx.addon("keda") + ctx.objects
                if o["kind"].lower() == kind and o["metadata"]["name"] == name]
        if not objs:
            p.add(where, "no %s %s in the manifests or addons" % (kind, name))
        else:
            for path in leaf_paths(patch):
                node = objs[0]
                for key in path:
                    node = node.get(key) if isinstance(node, dict) else None
                if node is None:
                    p.add(where, "%s %s has no field %s" % (kind, name, ".".join(path)))
        return True
    if verb == "get" and a[1] == "--raw":
        m = re.match(r"^/apis/external\.metrics\.k8s\.io/v1beta1/namespaces/([^/]+)/([^/]+)$", a[2])
        metrics = re.findall(r"'metric': \{'name': '([^']+)'", repr(ctx.addon("hpa")))
        if not m or m.group(1) != ctx.namespace or m.group(2) not in metrics:
            p.add(where, "not the external metric the HPA reads (%s in %s)" % (metrics,
                                                                              ctx.namespace))
        return True
    if verb == "scale":
        kind, name = a[1].split("/")
        if kind != "deployment" or not ctx.named("Deployment", name):
            p.add(where, "no Deployment %s in %s" % (name, OVERLAY))
        return True
    if verb in ("rollout", "logs"):
        ref = next(x for x in a if "/" in x)
        kind, name = ref.split("/")
        if kind != "deployment" or not ctx.named("Deployment", name):
            p.add(where, "no Deployment %s in %s" % (name, OVERLAY))
        if verb == "rollout" and a[1] not in ("status", "restart"):
            p.add(where, "unexpected rollout subcommand %s" % a[1])
        return True
    if verb == "port-forward":
        kind, name = a[1].split("/")
        remote = int(a[2].split(":")[-1])
        svc = ctx.named("Service", name)
        if kind != "service" or not svc:
            p.add(where, "no Service %s" % name)
        elif remote not in [port["port"] for port in svc[0]["spec"]["ports"]]:
            p.add(where, "Service %s has no port %d" % (name, remote))
        return True
    if verb == "get" and a[1] == "secret":
        name = a[2]
        m = re.search(r"\{\.data\.([A-Za-z0-9_.-]+)\}", " ".join(a))
        if name not in ctx.documented_secrets or (m and m.group(1) not in
                                                  ctx.documented_secrets[name]):
            p.add(where, "secret %s%s is not created by the docs" % (
                name, "/" + m.group(1) if m else ""))
        return True
    if verb == "get" and a[1].startswith("persistentvolumeclaim/"):
        name = a[1].split("/", 1)[1]
        if "'claimName': '%s'" % name not in repr(ctx.objects):
            p.add(where, "no pod mounts claim %s" % name)
        return True
    if verb == "label" and a[1] == "namespace":
        key, _, value = a[3].partition("=")
        selectors = [r for r in re.findall(r"'namespaceSelector': \{'matchLabels': (\{[^}]*\})",
                                           repr(ctx.objects))]
        if not any("'%s': '%s'" % (key, value) in s for s in selectors):
            p.add(where, "no NetworkPolicy admits namespaces labelled %s=%s" % (key, value))
        return True
    return False


def check_build_sh(ctx, env, argv, p, where):
    env = dict(os.environ, **{k: ("0" * 64 if v.startswith("<") else v) for k, v in env.items()})
    args = [x for x in argv[1:] if x != "--dry-run"]
    r = subprocess.run(["bash", os.path.join(ctx.repo, argv[0]), "--dry-run"] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, cwd=ctx.repo, env=env)
    if r.returncode != 0 or "docker build" not in r.stdout:
        p.add(where, "build.sh --dry-run %s failed:\n%s" % (" ".join(args), r.stdout[-1500:]))
    if "--push" in args and "docker push" not in r.stdout:
        p.add(where, "--push prints no docker push")


def check_docker_run(ctx, argv, p, where):
    opts_with_value = {"--name", "-p", "-e", "--gpus", "-v"}
    i, env, ports = 2, [], []
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in opts_with_value:
            if argv[i] == "-e":
                env.append(argv[i + 1].split("=")[0])
            if argv[i] == "-p":
                ports.append(int(argv[i + 1].split(":")[-1]))
            i += 2
        else:
            i += 1
    image, args = argv[i], argv[i + 1:]
    if image not in ctx.built_images:
        p.add(where, "image %s is not one build.sh makes (%s)" % (image, sorted(ctx.built_images)))
    name = dc.image_parts(image)[1]
    binary = "quantd" if name == "quantd" else "quantd-worker"
    for flag in dc.flags_in_args(args):
        if dc.normalize_flag(flag) not in ctx.flags[binary]:
            p.add(where, "%s has no flag --%s" % (binary, flag))
    dockerfile = "Dockerfile.quantd" if name == "quantd" else "Dockerfile." + name.replace(
        "quantd-", "")
    text = dc.read(ctx.repo, "deploy/docker/" + dockerfile)
    for var in env:
        if not re.search(r"^ENV %s=" % var, text, re.M):
            p.add(where, "%s sets no ENV %s" % (dockerfile, var))
    listened = {dc.listen_port(v) for f in ("listen", "metrics_listen")
                for v in [dc.flag_value(args, f)] if v}
    for port in ports:
        if binary == "quantd" and port not in listened:
            p.add(where, "-p %d, but quantd listens on %s" % (port, sorted(listened)))


def check_script(ctx, argv, p, where):
    script = os.path.join(ctx.repo, argv[1])
    if not os.path.exists(script):
        p.add(where, "%s does not exist" % argv[1])
        return
    python = argv[0] if os.path.isabs(argv[0]) else "/usr/bin/python3"
    r = subprocess.run([python, script, "--help"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True,
                       env=dict(os.environ, PYTHONPATH=ctx.sdk))
    for flag in dc.flags_in_args(argv[2:]):
        if "--" + flag not in r.stdout:
            p.add(where, "%s --help lists no --%s:\n%s" % (argv[1], flag, r.stdout[-800:]))


def check_bazel(ctx, argv, p, where):
    for label in argv[2:]:
        pkg, _, name = label[2:].partition(":")
        build = os.path.join(ctx.repo, pkg, "BUILD")
        if not os.path.exists(build) or 'name = "%s"' % name not in dc.read(ctx.repo, pkg + "/BUILD"):
            p.add(where, "no target %s" % label)


def check_token_snippet(ctx, text, p, where):
    """Runs the doc's token commands as written, then starts quantd on them."""
    block = re.search(r"^(WORKER_TOKEN=.*?\n\} > tokens)\n", text, re.S | re.M)
    if not block:
        p.add(where, "the token snippet is missing")
        return
    shell = block.group(1)
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", shell + "\ncp tokens kept-tokens"],
                           cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        if r.returncode != 0:
            p.add(where, "the token snippet fails:\n" + r.stdout)
            return
        port_file = os.path.join(tmp, "port")
        proc = subprocess.Popen([ctx.binaries["quantd"], "--listen=127.0.0.1:0",
                                 "--port-file=" + port_file, "--data-dir=" + tmp,
                                 "--auth-tokens=" + os.path.join(tmp, "kept-tokens")],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                universal_newlines=True)
        # A ceiling for a hang only: a loaded machine starts quantd slowly.
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None and not os.path.exists(port_file):
            time.sleep(0.1)
        started = proc.poll() is None and os.path.exists(port_file)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=600)[0]
        if not started:
            p.add(where, "quantd does not start with the snippet's tokens file:\n" + out[-1500:])


def is_tls_command(cmd):
    """The openssl commands that make quantd's CA, key and certificate, and
    the printf that writes their extensions file."""
    return bool(re.match(r"^openssl (req|x509)\b", cmd) or
                re.match(r"^printf .*> tls\.ext$", cmd))


def tls_names(ctx):
    """Every name the frontend's certificate must carry: its Service's DNS
    names, the host workers dial (QUANTD_SERVER), the probes'
    --tls-server-name, and localhost / 127.0.0.1 for kubectl port-forward."""
    names = {"localhost", "127.0.0.1"}
    for _, tmpl in dc.pod_templates(ctx.objects):
        for c in tmpl["spec"]["containers"]:
            if not dc.flag_value(c.get("args", []), "tls_cert"):
                continue
            names.update(dc.service_names(ctx.objects, tmpl))
            server = dc.container_env(c, ctx.objects).get("QUANTD_SERVER", "")
            names.add(server.rsplit(":", 1)[0])
            for n in dc.PROBES:
                name = dc.flag_value(dc.probe_argv(c.get(n)) or [], "tls_server_name")
                if name:
                    names.add(name)
    return sorted(n for n in names if n)


def start_quantd(ctx, tmp, extra):
    """quantd on 127.0.0.1 with `extra` flags; (process, its HOST:PORT or None)."""
    port_file = os.path.join(tmp, "port")
    if os.path.exists(port_file):
        os.remove(port_file)
    proc = subprocess.Popen([ctx.binaries["quantd"], "--listen=127.0.0.1:0",
                             "--port-file=" + port_file, "--data-dir=" + tmp] + extra,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True)
    # A ceiling for a hang only: a loaded machine starts quantd slowly.
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None and not os.path.exists(port_file):
        time.sleep(0.1)
    address = None
    if proc.poll() is None and os.path.exists(port_file):
        with open(port_file) as f:
            address = f.read().strip()
    return proc, address


def check_tls_snippets(ctx, text, p, where):
    """Runs the doc's TLS commands as written, run after run in one
    directory (the CA of the first run signs the renewals), and after each
    run checks what it left: the certificate chains to ca.crt, belongs to
    tls.key and names every name the manifests use, and quantd serves TLS
    with it, which quantd-health-probe verifies under each of those names
    (and refuses under another)."""
    runs, last = [], None
    for i, (_, cmd) in enumerate(doc_commands(text)):
        if is_tls_command(cmd):
            if last != i - 1:
                runs.append([])
            runs[-1].append(cmd)
            last = i
    if not runs:
        p.add(where, "the TLS snippet is missing")
        return
    names = tls_names(ctx)
    with tempfile.TemporaryDirectory() as tmp:
        for n, run in enumerate(runs, 1):
            w = "%s, run %d" % (where, n)
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(run)], cwd=tmp,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True)
            if r.returncode != 0:
                p.add(w, "the TLS commands fail:\n" + r.stdout[-1500:])
                return
            files = {k: os.path.join(tmp, f) for k, f in
                     (("cert", "tls.crt"), ("key", "tls.key"), ("ca", "ca.crt"))}
            absent = [f for f in files.values() if not os.path.exists(f)]
            if absent:
                p.add(w, "the TLS commands leave no %s" % ", ".join(absent))
                return
            dc.check_tls_material(p, w, files, names)
            proc, address = start_quantd(ctx, tmp, ["--tls-cert=" + files["cert"],
                                                    "--tls-key=" + files["key"]])
            try:
                if address is None:
                    p.add(w, "quantd does not start with the snippet's certificate")
                    continue
                for name in names + ["other.example"]:
                    code = subprocess.run(
                        [ctx.binaries["quantd-health-probe"], "--addr=" + address,
                         "--tls-ca=" + files["ca"], "--tls-server-name=" + name],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT).returncode
                    if (code == 0) != (name != "other.example"):
                        p.add(w, "quantd-health-probe --tls-server-name=%s exits %d" % (name, code))
            finally:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                out = proc.communicate(timeout=600)[0]
                if address is None:
                    p.add(w, "quantd:\n" + out[-1500:])


def check_doc(ctx, doc, text):
    p = dc.Problems()
    for line, cmd in doc_commands(text):
        where = "%s:%d `%s`" % (doc, line, cmd if len(cmd) < 90 else cmd[:87] + "...")
        if cmd.split()[0] in SHELL_WORDS or re.match(r"^[A-Z_]+=\"\$\(openssl ", cmd):
            continue  # the token snippet's shell plumbing: check_token_snippet runs it
        for argv in segments(cmd):
            env = {}
            while argv and re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]):
                k, v = argv.pop(0).split("=", 1)
                env[k] = v
            if not argv:
                continue  # TOKEN="$(openssl ...)": the token snippet
            word = argv[0]
            if word in SHELL_WORDS or word in ("base64", "less", "cut", "sha256sum"):
                continue
            if word == "kubectl":
                if not check_kubectl(ctx, argv, p, where):
                    p.add(where, "no check for this kubectl command")
            elif word.endswith("deploy/docker/build.sh"):
                check_build_sh(ctx, env, argv, p, where)
            elif argv[:2] == ["docker", "run"]:
                check_docker_run(ctx, argv, p, where)
            elif word == "kind" and argv[1:3] == ["create", "cluster"]:
                pass
            elif word == "kind" and argv[1:3] == ["load", "docker-image"]:
                for image in argv[3:]:
                    if image not in ctx.built_images:
                        p.add(where, "image %s is not one build.sh makes" % image)
            elif word.endswith("python3") and argv[1].endswith(".py"):
                check_script(ctx, argv, p, where)
            elif argv[:2] == ["bazel", "test"]:
                check_bazel(ctx, argv, p, where)
            else:
                p.add(where, "no check for this command")
    if "WORKER_TOKEN=" in text:
        check_token_snippet(ctx, text, p, doc + " (token snippet)")
    if any(is_tls_command(cmd) for _, cmd in doc_commands(text)):
        check_tls_snippets(ctx, text, p, doc + " (TLS snippet)")
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--binary", action="append", default=[])
    ap.add_argument("--sdk", required=True, help="directory holding quantd_client")
    a = ap.parse_args()
    binaries = dict(b.split("=", 1) for b in a.binary)
    ctx = Context(a.repo, binaries, a.sdk)
    p = dc.Problems()
    counted = 0
    texts = {}
    for doc in DOCS:
        texts[doc] = dc.read(a.repo, doc)
        counted += len(doc_commands(texts[doc]))
        p.extend(check_doc(ctx, doc, texts[doc]))
    # The checks can fail: broken copies of the docs must be reported.
    deploy_md = texts["docs/deploy.md"]
    mutations = [
        ("deployment/quantd-worker", "deployment/quantd-wrker", "no Deployment quantd-wrker"),
        ("service/quantd 50051:50051", "service/quantd 50051:50052", "has no port 50052"),
        ("--metrics-listen=0.0.0.0:9090", "--metrics-port=9090", "has no flag --metrics-port"),
        ("create secret generic quantd-postgres", "create secret generic quantd-pg",
         "no manifest reads secret quantd-pg"),
        ("kubectl apply -k deploy/k8s/addons/keda", "kubectl apply -k deploy/k8s/addons/kedda",
         "kustomize"),
        ("kubectl create namespace quantd", "kubectl create namespace quantd\nkubectl drain node-1",
         "no check for this kubectl command"),
        ("  echo \"$(printf %s \"$ADMIN_TOKEN\" | sha256sum | cut -d' ' -f1)  ops  admin\"",
         "  echo \"$(printf %s \"$ADMIN_TOKEN\" | sha256sum)  ops  admin\"",
         "does not start"),
        ("DNS:quantd,DNS:quantd.quantd,", "DNS:quantd.quantd,",
         "the certificate does not name quantd "),
        (" --from-file=ca.crt=ca.crt", "",
         "the manifests read ['ca.crt'] from quantd-tls, which this command does not create"),
        ("-CA ca.crt -CAkey ca.key -CAcreateserial -days 397", "-signkey tls.key -days 397",
         "does not verify against ca.crt"),
        ("--server 127.0.0.1:50051 \\\n  --token \"$ADMIN_TOKEN\" --tls-ca ca.crt",
         "--server 127.0.0.1:50051 \\\n  --token \"$ADMIN_TOKEN\" --tls-ca-file ca.crt",
         "lists no --tls-ca-file"),
    ]
    for old, new, expect in mutations:
        if old not in deploy_md:
            p.add("self-test", "docs/deploy.md no longer contains %r" % old)
            continue
        found = check_doc(ctx, "docs/deploy.md", deploy_md.replace(old, new, 1)).items
        if not any(expect in f for f in found):
            p.add("self-test", "changing %r to %r was not reported (wanted %r)" % (old, new, expect))
    if p.items:
        print("\n".join(p.items))
        print("doc_commands: %d problem(s)" % len(p.items))
        return 1
    print("doc_commands: %d commands in %s checked, %d broken copies caught" % (
        counted, " and ".join(DOCS), len(mutations)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
