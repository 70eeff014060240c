"""Static checks of quantd's deployment files against the real binaries.

No Docker engine or cluster is needed. The checks:
  * every YAML file parses and passes yamllint (deploy/.yamllint);
  * every kustomize overlay and addon renders with `kubectl kustomize`;
  * rendered containers pass only flags the binaries accept (their
    --helpfull), probes and Services point at ports the containers open and
    the binaries listen on, Secrets/ConfigMaps/PVCs referenced exist (in the
    render, or in docs/deploy.md's `kubectl create` commands), images are
    consistently named and tagged with quantd's version, resources are
    requested, GPU workers ask for their accelerator;
  * the Dockerfiles: pinned bases, COPY sources that exist, Bazel targets
    that exist, runtime stages that install every Debian package the
    binaries' shared libraries come from (ldd + dpkg -S) and no build tools,
    a non-root USER, health checks and entrypoints using real flags;
  * deploy/docker/build.sh tags the images the manifests deploy.

Run as a test by //deploy:deploy_test, or by hand:
  /usr/bin/python3 deploy/tests/deploy_check.py --repo . \
      --binary quantd=bazel-bin/server/quantd ...
"""

import argparse
import os
import re
import shlex
import subprocess
import sys

import yaml

OVERLAYS = ["cpu", "nvidia", "amd", "dev"]
ADDONS = ["keda", "hpa", "servicemonitor"]
# Image repository name (after the registry) -> binary its entrypoint runs.
IMAGE_BINARY = {
    "quantd": "quantd",
    "quantd-worker-cpu": "quantd-worker",
    "quantd-worker-cuda": "quantd-worker",
    "quantd-worker-rocm": "quantd-worker",
}
DOCKERFILE_IMAGE = {
    "Dockerfile.quantd": "quantd",
    "Dockerfile.worker-cpu": "quantd-worker-cpu",
    "Dockerfile.worker-cuda": "quantd-worker-cuda",
    "Dockerfile.worker-rocm": "quantd-worker-rocm",
}
OVERLAY_WORKER = {
    "cpu": ("quantd-worker-cpu", None, "cpu"),
    "dev": ("quantd-worker-cpu", None, "cpu"),
    "nvidia": ("quantd-worker-cuda", "nvidia.com/gpu", "cuda:0"),
    "amd": ("quantd-worker-rocm", "amd.com/gpu", "cuda:0"),
}
# Present in every Debian image (Essential or required by apt itself).
BASE_IMAGE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}
BUILD_TOOLS = re.compile(r"^(g\+\+|gcc|clang|cmake|make|bazel|bazel-bootstrap|build-essential)(-\d+)?$")
# Kustomize v5 warns about the fields v2.0 (Debian's kubectl) needs.
KUSTOMIZE_WARNING = re.compile(r"^# Warning: '(bases|patchesStrategicMerge)' is deprecated")


class Problems:
    """Collects findings instead of stopping at the first one."""

    def __init__(self):
        self.items = []

    def add(self, where, message):
        self.items.append("%s: %s" % (where, message))

    def extend(self, other):
        self.items.extend(other.items)


# ---------------------------------------------------------------- binaries


def binary_flags(path):
    """Flag names (underscore spelling) from `BINARY --helpfull`."""
    out = subprocess.run([path, "--helpfull"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, timeout=60).stdout
    flags = set(re.findall(r"^    --([A-Za-z0-9_]+) \(", out, re.M))
    if not flags:
        raise RuntimeError("no flags found in `%s --helpfull`:\n%s" % (path, out[:2000]))
    return flags


def normalize_flag(name):
    return name.replace("-", "_")


def flags_in_args(args):
    """Flag names passed in an argv list (`--name=value` or `--name value`)."""
    names = []
    for arg in args:
        m = re.match(r"^--([A-Za-z0-9_-]+)(=|$)", arg)
        if m and arg != "--":
            names.append(m.group(1))
    return names


def flag_value(args, name):
    """The value of --name in an argv list, or None."""
    want = normalize_flag(name)
    for i, arg in enumerate(args):
        m = re.match(r"^--([A-Za-z0-9_-]+)(?:=(.*))?$", arg)
        if m and normalize_flag(m.group(1)) == want:
            if m.group(2) is not None:
                return m.group(2)
            return args[i + 1] if i + 1 < len(args) else ""
    return None


def shared_library_packages(path, skip_library=None):
    """Debian packages providing the shared libraries `path` links directly.

    Their own dependencies are apt's business (shlibs), so only the
    binary's DT_NEEDED entries count. Libraries matching skip_library (a
    vendor LibTorch's) come from the vendor archive instead.
    """
    ldd = subprocess.run(["ldd", path], stdout=subprocess.PIPE, universal_newlines=True,
                         check=True).stdout
    where = {}
    for line in ldd.splitlines():
        m = re.match(r"^\s*(\S+) => (/\S+)", line)
        if m:
            where[m.group(1)] = m.group(2)
        # The dynamic loader, listed by path alone. A PIE binary needs it by
        # name when its code calls __tls_get_addr (general-dynamic TLS).
        m = re.match(r"^\s*(/\S+) \(0x", line)
        if m:
            where[os.path.basename(m.group(1))] = m.group(1)
    dynamic = subprocess.run(["readelf", "-d", path], stdout=subprocess.PIPE,
                             universal_newlines=True, check=True).stdout
    libs = {}
    for name in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic):
        if skip_library and skip_library.match(name):
            continue
        if name not in where:
            raise RuntimeError("ldd does not resolve %s needed by %s" % (name, path))
        libs[name] = where[name]
    owners = dpkg_packages(libs.values())
    return {name: owners[lib_path] for name, lib_path in libs.items()}


def dpkg_packages(lib_paths):
    """{library path: Debian package}, from one `dpkg -S` (a call costs ~1 s)."""
    spellings = {}
    for lib_path in lib_paths:
        candidates = {lib_path, os.path.realpath(lib_path)}
        for c in list(candidates):  # merged /usr: dpkg may know the other spelling
            if c.startswith("/usr/lib/"):
                candidates.add(c[len("/usr"):])
            elif c.startswith("/lib/"):
                candidates.add("/usr" + c)
        for c in candidates:
            spellings[c] = lib_path
    out = subprocess.run(["dpkg", "-S"] + sorted(spellings), stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, universal_newlines=True).stdout
    owners = {}
    for line in out.splitlines():
        package, _, path = line.partition(": ")
        if path in spellings:
            owners[spellings[path]] = package.split(":")[0].split(",")[0].strip()
    for lib_path in lib_paths:
        if lib_path not in owners:
            raise RuntimeError("no Debian package owns %s" % lib_path)
    return owners


# -------------------------------------------------------------- Dockerfiles


def parse_dockerfile(text):
    """Instructions as (KEYWORD, argument text), continuation lines joined."""
    instructions = []
    current = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if current and line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        keyword, _, rest = current.strip().partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        current = ""
    return instructions


class Stage:

    def __init__(self, name, base):
        self.name = name
        self.base = base
        self.instructions = []


def dockerfile_stages(instructions):
    args = {}
    stages = []
    for keyword, rest in instructions:
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif keyword == "FROM":
            m = re.match(r"^(\S+)(?:\s+AS\s+(\S+))?$", rest, re.I)
            base = re.sub(r"\$\{(\w+)\}", lambda v: args.get(v.group(1), ""), m.group(1))
            stages.append(Stage(m.group(2), base))
        elif stages:
            stages[-1].instructions.append((keyword, rest))
    return args, stages


def exec_form(rest):
    """The argv of a JSON-array instruction (ENTRYPOINT/CMD), else None."""
    rest = rest.strip()
    if not rest.startswith("["):
        return None
    return yaml.safe_load(rest)


def apt_packages(run_text):
    m = re.search(r"apt-get install\s+(.*?)(?:&&|$)", run_text)
    if not m:
        return []
    return [w for w in m.group(1).split() if not w.startswith("-")]


def bazel_targets(run_text):
    m = re.search(r"bazel build\s+(.*?)(?:&&|$)", run_text)
    if not m:
        return [], []
    words = m.group(1).split()
    return [w for w in words if w.startswith("//")], [w for w in words if w.startswith("--")]


def build_file_targets(repo, label):
    pkg, _, name = label[2:].partition(":")
    path = os.path.join(repo, pkg, "BUILD")
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return re.search(r'name\s*=\s*"%s"' % re.escape(name), f.read()) is not None


def check_dockerfile(repo, file_name, text, flags, lib_packages, vendor_lib_packages):
    """Checks one Dockerfile; returns (Problems, entrypoint argv, user)."""
    p = Problems()
    where = "deploy/docker/" + file_name
    args, stages = dockerfile_stages(parse_dockerfile(text))
    names = [s.name for s in stages]
    if not stages or stages[-1].name != "runtime":
        p.add(where, "the last stage must be named runtime")
        return p, None, None
    if len(stages) < 2:
        p.add(where, "not a multi-stage build")
    for s in stages:
        image, _, tag = s.base.partition(":")
        if "@sha256:" in s.base:
            continue
        if not tag or tag == "latest" or not re.search(r"\d", tag):
            p.add(where, "base image %r of stage %s is not pinned to a version" % (s.base, s.name))
    out_binaries = {}  # /out/NAME -> bazel label
    runtime = stages[-1]
    vendor_home = None
    runtime_packages = []
    for i, s in enumerate(stages):
        for keyword, rest in s.instructions:
            if keyword == "COPY":
                words = rest.split()
                from_stage = None
                while words and words[0].startswith("--"):
                    m = re.match(r"--from=(\S+)", words[0])
                    if m:
                        from_stage = m.group(1)
                    words = words[1:]
                sources = words[:-1]
                if from_stage is not None:
                    if from_stage not in names[:i]:
                        p.add(where, "COPY --from=%s names no earlier stage" % from_stage)
                else:
                    for src in sources:
                        if not os.path.exists(os.path.join(repo, src)):
                            p.add(where, "COPY source %s does not exist in the repository" % src)
            elif keyword == "RUN":
                targets, options = bazel_targets(rest)
                for t in targets:
                    if not build_file_targets(repo, t):
                        p.add(where, "bazel target %s does not exist" % t)
                for o in options:
                    m = re.match(r"--config=(\w+)", o)
                    if m and not re.search(r"^build:%s " % m.group(1), read(repo, ".bazelrc"), re.M):
                        p.add(where, "bazel --config=%s is not in .bazelrc" % m.group(1))
                for t in targets:
                    out_binaries["/out/" + t.split(":")[1]] = t
                if s is runtime:
                    runtime_packages.extend(apt_packages(rest))
            elif keyword == "ENV":
                m = re.match(r"LIBTORCH_HOME=(\S+)", rest)
                if m:
                    vendor_home = m.group(1)
    if "--config=" in text:
        copies_lib = any(k == "COPY" and vendor_home and
                         r.split()[-2:] == [vendor_home + "/lib", vendor_home + "/lib"]
                         for k, r in runtime.instructions)
        if not vendor_home or not copies_lib:
            p.add(where, "a vendor LibTorch build must set LIBTORCH_HOME and copy its lib/ "
                  "to the same path in the runtime stage (the binary's rpath)")
    # What the runtime stage ends up with.
    copied = set()
    user = None
    entrypoint = cmd = None
    healthcheck = None
    for keyword, rest in runtime.instructions:
        if keyword == "COPY" and "--from=" in rest:
            words = rest.split()[1:]
            for src in words[:-1]:
                if src in out_binaries:
                    copied.add(src[len("/out/"):])
        elif keyword == "USER":
            user = rest
        elif keyword == "ENTRYPOINT":
            entrypoint = exec_form(rest)
        elif keyword == "CMD":
            cmd = exec_form(rest)
        elif keyword == "HEALTHCHECK":
            healthcheck = rest
    for pkg in runtime_packages:
        if BUILD_TOOLS.match(pkg) or pkg.endswith("-dev"):
            p.add(where, "runtime stage installs build tool %s" % pkg)
    installed = set(runtime_packages) | BASE_IMAGE_PACKAGES
    needed = vendor_lib_packages if vendor_home else lib_packages
    for binary in sorted(copied):
        if binary not in needed:
            p.add(where, "no built %s to compare the runtime libraries with" % binary)
            continue
        for lib, pkg in sorted(needed[binary].items()):
            if pkg not in installed:
                p.add(where, "runtime stage lacks %s (for %s of %s)" % (pkg, lib, binary))
    if user is None or not re.match(r"^[1-9]\d*(:\d+)?$", user):
        p.add(where, "runtime USER must be a numeric non-root uid, got %r" % user)
    if not healthcheck or "CMD" not in healthcheck:
        p.add(where, "runtime stage has no HEALTHCHECK")
    else:
        hc = shlex.split(healthcheck.split("CMD", 1)[1]) if not healthcheck.split("CMD", 1)[
            1].strip().startswith("[") else exec_form(healthcheck.split("CMD", 1)[1])
        probe = os.path.basename(hc[0])
        if probe not in copied:
            p.add(where, "HEALTHCHECK runs %s, which the runtime stage does not copy" % probe)
        else:
            check_flags(p, where + " HEALTHCHECK", probe, hc[1:], flags)
    if entrypoint is None:
        p.add(where, "runtime stage has no exec-form ENTRYPOINT")
        return p, None, None
    argv = entrypoint_argv(entrypoint)
    binary = os.path.basename(argv[0])
    if binary not in copied:
        p.add(where, "ENTRYPOINT runs %s, which the runtime stage does not copy" % binary)
    else:
        check_flags(p, where + " ENTRYPOINT", binary, argv[1:] + (cmd or []), flags)
    return p, argv, user


def runtime_files(text):
    """Paths of the files the runtime stage copies from earlier stages
    (`COPY --from=STAGE SRC... DIR/`): what an exec probe may run."""
    _, stages = dockerfile_stages(parse_dockerfile(text))
    files = set()
    for keyword, rest in stages[-1].instructions if stages else []:
        words = rest.split()
        if keyword == "COPY" and words and words[0].startswith("--from=") and len(words) > 2:
            dest = words[-1]
            for src in words[1:-1]:
                files.add(dest + os.path.basename(src) if dest.endswith("/") else dest)
    return files


def entrypoint_argv(entrypoint):
    """The program and fixed flags of an ENTRYPOINT, unwrapping `sh -c`."""
    if entrypoint[:2] == ["/bin/sh", "-c"]:
        words = shlex.split(entrypoint[2])
        if words and words[0] == "exec":
            words = words[1:]
        return [w for w in words if w != "$@"]
    return list(entrypoint)


def check_flags(p, where, binary, args, flags):
    if binary not in flags:
        p.add(where, "no --helpfull for binary %s" % binary)
        return
    for name in flags_in_args(args):
        if normalize_flag(name) not in flags[binary]:
            p.add(where, "--%s is not a flag of %s" % (name, binary))


def read(repo, rel):
    with open(os.path.join(repo, rel)) as f:
        return f.read()


# --------------------------------------------------------------- manifests


def render(repo, rel_dir):
    r = subprocess.run(["kubectl", "kustomize", os.path.join(repo, rel_dir)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    stray = [l for l in r.stderr.splitlines() if l.strip() and not KUSTOMIZE_WARNING.match(l)]
    if r.returncode != 0 or stray:
        raise RuntimeError("kubectl kustomize %s failed:\n%s" % (rel_dir, r.stderr))
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def by_kind(objects, kind):
    return [o for o in objects if o.get("kind") == kind]


def image_parts(image):
    repo_part, _, tag = image.rpartition(":")
    if "/" in tag or not repo_part:
        repo_part, tag = image, ""
    registry, _, name = repo_part.rpartition("/")
    return registry, name, tag


def documented_secrets(doc_text):
    """{secret name: set of keys} from `kubectl create secret generic` commands."""
    secrets = {}
    joined = doc_text.replace("\\\n", " ")
    for m in re.finditer(r"kubectl\b[^\n]*?create secret generic (\S+)([^\n]*)", joined):
        keys = set(re.findall(r"--from-(?:literal|file)=([A-Za-z0-9_.-]+)=", m.group(2)))
        secrets.setdefault(m.group(1), set()).update(keys)
    return secrets


def documented_claims(doc_text):
    return set(re.findall(r"persistentvolumeclaim/([a-z0-9-]+)", doc_text)) | set(
        re.findall(r"name: (quantd-[a-z0-9-]+)\s*# PersistentVolumeClaim", doc_text))


def pod_templates(objects):
    for o in objects:
        if o.get("kind") in ("Deployment", "StatefulSet"):
            yield o, o["spec"]["template"]


def expand(arg, env):
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), arg)


def container_env(container, objects):
    """Environment names -> values where known (ConfigMap values, literals)."""
    env = {}
    for src in container.get("envFrom", []):
        if "configMapRef" in src:
            for cm in by_kind(objects, "ConfigMap"):
                if cm["metadata"]["name"] == src["configMapRef"]["name"]:
                    env.update(cm.get("data", {}))
    for e in container.get("env", []):
        env[e["name"]] = e.get("value", "<from %s>" % list(e.get("valueFrom", {"?": 0}))[0])
    return env


def listen_port(value):
    return int(value.rsplit(":", 1)[1]) if value and ":" in value else None


# Flags whose value is a file the container must find in a mounted Secret.
SECRET_FILE_FLAGS = ("auth_tokens", "token_file", "tls_cert", "tls_key", "tls_ca",
                     "tls_client_ca")
PROBES = ("readinessProbe", "livenessProbe", "startupProbe")


def probe_argv(probe):
    """The argv of an exec probe (`sh -c "exec ..."` unwrapped), else None."""
    command = (probe or {}).get("exec", {}).get("command")
    if not command:
        return None
    argv = shlex.split(command[2]) if command[:2] == ["/bin/sh", "-c"] else list(command)
    if argv and argv[0] == "exec":
        argv = argv[1:]
    return argv


def secret_file(path, mounts, volumes):
    """(Secret name, key) of the file `path` in a container with these
    volumeMounts ({mountPath: mount}) and pod volumes ({name: volume});
    key is None when the volume's items do not project that path. None when
    no Secret volume is mounted above `path`."""
    for mount_path, m in mounts.items():
        prefix = mount_path.rstrip("/") + "/"
        vol = volumes.get(m["name"], {})
        if not path.startswith(prefix) or "secret" not in vol:
            continue
        rel = path[len(prefix):]
        items = vol["secret"].get("items")
        if items is None:
            return vol["secret"]["secretName"], rel
        return vol["secret"]["secretName"], next(
            (i["key"] for i in items if i["path"] == rel), None)
    return None


def secret_keys_read(objects):
    """{Secret name: keys the pods read}: secretKeyRef keys, the items of
    Secret volumes, and the files that container args and exec probes name
    in a whole mounted Secret. A Secret mounted but not read has no keys."""
    read = {}
    for _, tmpl in pod_templates(objects):
        spec = tmpl["spec"]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for v in volumes.values():
            if "secret" in v:
                keys = read.setdefault(v["secret"]["secretName"], set())
                keys.update(i["key"] for i in v["secret"].get("items", []))
        for c in spec["containers"]:
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    read.setdefault(ref["name"], set()).add(ref["key"])
            mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
            argvs = [c.get("args", [])] + [probe_argv(c.get(n)) or [] for n in PROBES]
            for argv in argvs:
                for flag in SECRET_FILE_FLAGS:
                    value = flag_value(argv, flag)
                    found = value and secret_file(value, mounts, volumes)
                    if found and found[1] is not None:
                        read.setdefault(found[0], set()).add(found[1])
    return read


def service_names(objects, tmpl):
    """The DNS names of the Services selecting a pod template."""
    names = []
    for svc in by_kind(objects, "Service"):
        if svc["spec"]["selector"].items() <= tmpl["metadata"].get("labels", {}).items():
            n, ns = svc["metadata"]["name"], svc["metadata"].get("namespace", "default")
            names += [n, "%s.%s" % (n, ns), "%s.%s.svc" % (n, ns),
                      "%s.%s.svc.cluster.local" % (n, ns)]
    return names


def check_overlay(overlay, objects, flags, images, docs, version):
    """Checks one rendered overlay. images: image name -> (argv, user)."""
    p = Problems()
    where = "overlays/" + overlay
    secrets = {s["metadata"]["name"]: set(s.get("data", {})) | set(s.get("stringData", {}))
               for s in by_kind(objects, "Secret")}
    if not secrets:  # production overlays: the platform team creates them
        secrets = documented_secrets(docs)
    configmaps = {c["metadata"]["name"]: set(c.get("data", {})) for c in by_kind(objects, "ConfigMap")}
    claims = {c["metadata"]["name"] for c in by_kind(objects, "PersistentVolumeClaim")}
    claims |= documented_claims(docs)

    quantd_images = set()
    for obj, tmpl in pod_templates(objects):
        name = obj["metadata"]["name"]
        w = "%s %s/%s" % (where, obj["kind"], name)
        spec = tmpl["spec"]
        labels = tmpl["metadata"].get("labels", {})
        if obj["spec"]["selector"].get("matchLabels", {}).items() - labels.items():
            p.add(w, "selector does not match the pod labels")
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for v in volumes.values():
            if "secret" in v and v["secret"]["secretName"] not in secrets:
                p.add(w, "volume %s uses Secret %s, which does not exist" % (
                    v["name"], v["secret"]["secretName"]))
            elif "secret" in v:
                for item in v["secret"].get("items", []):
                    if item["key"] not in secrets[v["secret"]["secretName"]]:
                        p.add(w, "volume %s projects key %s of Secret %s, which does not exist"
                              % (v["name"], item["key"], v["secret"]["secretName"]))
            if "persistentVolumeClaim" in v and v["persistentVolumeClaim"]["claimName"] not in claims:
                p.add(w, "volume %s uses PVC %s, which does not exist" % (
                    v["name"], v["persistentVolumeClaim"]["claimName"]))
        pod_user = spec.get("securityContext", {}).get("runAsUser")
        for c in spec["containers"]:
            cw = "%s container %s" % (w, c["name"])
            res = c.get("resources", {})
            for key in ("cpu", "memory"):
                if key not in res.get("requests", {}):
                    p.add(cw, "no %s request" % key)
            if "memory" not in res.get("limits", {}):
                p.add(cw, "no memory limit")
            if not spec.get("securityContext", {}).get("runAsNonRoot"):
                p.add(cw, "pod does not set runAsNonRoot")
            registry, image_name, tag = image_parts(c["image"])
            env = container_env(c, objects)
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                # An optional key may be absent: the variable is then unset.
                if ref and not ref.get("optional") and ref["key"] not in secrets.get(ref["name"], set()):
                    p.add(cw, "env %s reads key %s of Secret %s, which does not exist" % (
                        e["name"], ref["key"], ref["name"]))
            for src in c.get("envFrom", []):
                ref = src.get("configMapRef")
                if ref and ref["name"] not in configmaps:
                    p.add(cw, "envFrom ConfigMap %s does not exist" % ref["name"])
            ports = {pt["name"]: pt["containerPort"] for pt in c.get("ports", [])}
            if image_name not in IMAGE_BINARY:
                if image_name != "postgres":
                    p.add(cw, "unknown image %s" % c["image"])
                elif not re.match(r"^\d+\.\d+", tag):
                    p.add(cw, "postgres image is not pinned: %s" % c["image"])
                continue
            quantd_images.add((registry, tag))
            if tag != version:
                p.add(cw, "image %s is not tagged with quantd's version %s" % (c["image"], version))
            if image_name not in images:
                p.add(cw, "image %s has no Dockerfile in deploy/docker" % image_name)
                continue
            entry_argv, image_user, image_files = images[image_name]
            for n in PROBES:
                argv = probe_argv(c.get(n))
                if argv and argv[0].startswith("/") and argv[0] not in image_files:
                    p.add(cw, "%s runs %s, which image %s does not ship" % (
                        n, argv[0], image_name))
            if pod_user is not None and image_user and str(pod_user) != image_user.split(":")[0]:
                p.add(cw, "runAsUser %s differs from the image's USER %s" % (pod_user, image_user))
            binary = IMAGE_BINARY[image_name]
            args = list(entry_argv[1:]) + list(c.get("args", []))
            if "command" in c:
                p.add(cw, "overrides the image's entrypoint")
            check_flags(p, cw, binary, args, flags)
            for arg in c.get("args", []):
                for var in re.findall(r"\$\((\w+)\)", arg):
                    if var not in env:
                        p.add(cw, "%s uses $(%s), which the container's environment lacks" % (arg, var))
            for var in re.findall(r"\$\{?(\w+)", " ".join(entry_argv)):
                if var not in env and var != "@":
                    p.add(cw, "the entrypoint reads $%s, which the container's environment lacks" % var)
            mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
            argvs = [("", args)] + [(" " + n, probe_argv(c.get(n))) for n in PROBES
                                    if probe_argv(c.get(n))]
            for label, argv in argvs:
                for flag in SECRET_FILE_FLAGS:
                    value = flag_value(argv, flag)
                    if not value:
                        continue
                    shown = flag.replace("_", "-")
                    found = secret_file(value, mounts, volumes)
                    if not found:
                        p.add(cw + label, "--%s=%s is not inside a mounted Secret" % (shown, value))
                    elif found[1] is None:
                        p.add(cw + label, "--%s=%s: the Secret volume's items do not project it"
                              % (shown, value))
                    elif found[0] in secrets and found[1] not in secrets[found[0]]:
                        p.add(cw + label, "--%s=%s reads key %s of Secret %s, which does not exist"
                              % (shown, value, found[1], found[0]))
            for m in mounts.values():
                if m["name"] not in volumes:
                    p.add(cw, "mounts volume %s, which the pod does not define" % m["name"])
            # URI roots must exist in the container: quantd and the worker
            # resolve them with realpath and refuse to start otherwise.
            for flag in ("allowed_uri_roots", "allowed_roots"):
                value = expand(flag_value(args, flag) or "", env)
                for root in [r for r in value.split(",") if r]:
                    path = root[len("file://"):] if root.startswith("file://") else root
                    if not path.startswith("/"):
                        continue
                    if not any(path == mp or path.startswith(mp.rstrip("/") + "/")
                               for mp in mounts):
                        p.add(cw, "--%s root %s is on no mounted volume" % (flag, root))
            if binary == "quantd":
                check_frontend(p, cw, obj, tmpl, c, args, ports, objects, env, flags)
            else:
                check_worker(p, cw, overlay, obj, c, args, env, flags, volumes, secrets)
    if len(quantd_images) > 1:
        p.add(where, "quantd images use different registries or tags: %s" % sorted(quantd_images))
    for svc in by_kind(objects, "Service"):
        selected = [t for _, t in pod_templates(objects)
                    if svc["spec"]["selector"].items() <= t["metadata"].get("labels", {}).items()]
        if not selected:
            p.add("%s Service/%s" % (where, svc["metadata"]["name"]), "selects no pods")
        for port in svc["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            for t in selected:
                names = {pt.get("name"): pt["containerPort"]
                         for c in t["spec"]["containers"] for pt in c.get("ports", [])}
                if target not in names and target not in names.values():
                    p.add("%s Service/%s" % (where, svc["metadata"]["name"]),
                          "targetPort %s is not a container port" % target)
    for pdb in by_kind(objects, "PodDisruptionBudget"):
        sel = pdb["spec"]["selector"]["matchLabels"]
        if not any(sel.items() <= t["metadata"].get("labels", {}).items()
                   for _, t in pod_templates(objects)):
            p.add("%s PodDisruptionBudget/%s" % (where, pdb["metadata"]["name"]), "selects no pods")
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    for required in [("Deployment", "quantd"), ("Deployment", "quantd-worker"),
                     ("Service", "quantd"), ("PodDisruptionBudget", "quantd"),
                     ("PodDisruptionBudget", "quantd-worker"), ("ConfigMap", "quantd-config")]:
        if required not in kinds:
            p.add(where, "renders no %s/%s" % required)
    if not by_kind(objects, "NetworkPolicy"):
        p.add(where, "renders no NetworkPolicy")
    return p


def check_frontend(p, cw, obj, tmpl, c, args, ports, objects, env, flags):
    if obj["spec"].get("replicas", 1) < 2:
        p.add(cw, "the frontend needs at least 2 replicas")
    grpc_port = listen_port(flag_value(args, "listen"))
    metrics_port = listen_port(flag_value(args, "metrics_listen"))
    if grpc_port is None or grpc_port not in ports.values():
        p.add(cw, "--listen port %s is not a containerPort" % grpc_port)
    if metrics_port is None or metrics_port not in ports.values():
        p.add(cw, "--metrics-listen port %s is not a containerPort" % metrics_port)
    # TLS is on: clients and workers reach the gRPC port over TLS only.
    if not flag_value(args, "tls_cert") or not flag_value(args, "tls_key"):
        p.add(cw, "the frontend serves no TLS (--tls-cert and --tls-key)")
    # So every probe is quantd-health-probe over TLS: the kubelet's native
    # gRPC probe speaks plaintext and would fail against a TLS port. The
    # name it verifies is the one workers dial, so one certificate serves both.
    server_host = (env.get("QUANTD_SERVER") or "").rsplit(":", 1)[0]
    for probe_name in PROBES:
        probe = c.get(probe_name)
        if probe is None:
            if probe_name != "startupProbe":
                p.add(cw, "no %s" % probe_name)
            continue
        argv = probe_argv(probe)
        if "grpc" in probe:
            p.add(cw, "%s is a plaintext gRPC probe; quantd serves TLS" % probe_name)
            continue
        if not argv or os.path.basename(argv[0]) != "quantd-health-probe":
            p.add(cw, "%s is not an exec of quantd-health-probe" % probe_name)
            continue
        check_flags(p, "%s %s" % (cw, probe_name), "quantd-health-probe", argv[1:], flags)
        port = listen_port(flag_value(argv[1:], "addr"))
        if port != grpc_port:
            p.add(cw, "%s probes port %s, quantd listens on %s" % (probe_name, port, grpc_port))
        service = flag_value(argv[1:], "service") or ""
        if service not in ("", "quantd.v1.QuantizationService", "quantd.v1.WorkerService"):
            p.add(cw, "%s asks for unknown health service %s" % (probe_name, service))
        if not flag_value(argv[1:], "tls_ca"):
            p.add(cw, "%s runs without --tls-ca" % probe_name)
        name = flag_value(argv[1:], "tls_server_name")
        if not name:
            p.add(cw, "%s runs without --tls-server-name" % probe_name)
        elif name != server_host:
            p.add(cw, "%s verifies the name %s, workers dial %s" % (probe_name, name, server_host))
        if probe.get("timeoutSeconds", 1) * 1000 <= int(
                flag_value(argv[1:], "timeout_ms") or 3000):
            p.add(cw, "%s: timeoutSeconds %s ends the probe before its own deadline" % (
                probe_name, probe.get("timeoutSeconds", 1)))
    annotations = tmpl["metadata"].get("annotations", {})
    if annotations.get("prometheus.io/scrape") != "true" or \
            annotations.get("prometheus.io/port") != str(metrics_port):
        p.add(cw, "prometheus.io annotations do not point at the metrics port %s" % metrics_port)
    store = flag_value(args, "store") or ""
    if not store.startswith("postgresql://"):
        p.add(cw, "the frontend's store must be PostgreSQL, got %r" % store)
    for netpol in by_kind(objects, "NetworkPolicy"):
        if netpol["spec"]["podSelector"].get("matchLabels", {}).items() <= \
                tmpl["metadata"]["labels"].items() and netpol["spec"]["podSelector"].get("matchLabels"):
            opened = {pt["port"] for rule in netpol["spec"].get("ingress", [])
                      for pt in rule.get("ports", [])}
            for port in (grpc_port, metrics_port):
                if port not in opened:
                    p.add(cw, "NetworkPolicy %s does not admit port %s" % (
                        netpol["metadata"]["name"], port))


def check_worker(p, cw, overlay, obj, c, args, env, flags, volumes, secrets):
    image_name, accelerator, device = OVERLAY_WORKER[overlay]
    if not flag_value(args, "tls_ca"):
        p.add(cw, "the worker dials quantd without TLS (no --tls-ca)")
    for v in volumes.values():
        if "secret" not in v or not any(m["name"] == v["name"] for m in c.get("volumeMounts", [])):
            continue
        items = v["secret"].get("items")
        exposed = {i["key"] for i in items} if items is not None else secrets.get(
            v["secret"]["secretName"], set())
        if "tls.key" in exposed:
            p.add(cw, "mounts tls.key of Secret %s: the server's private key in a worker" %
                  v["secret"]["secretName"])
    if image_parts(c["image"])[1] != image_name:
        p.add(cw, "overlay %s should run image %s, got %s" % (overlay, image_name, c["image"]))
    if flag_value(args, "device") != device:
        p.add(cw, "--device is %r, overlay %s wants %r" % (flag_value(args, "device"), overlay, device))
    limits = c.get("resources", {}).get("limits", {})
    if accelerator:
        if str(limits.get(accelerator)) != "1":
            p.add(cw, "limits must ask for %s: 1" % accelerator)
        tolerations = obj["spec"]["template"]["spec"].get("tolerations", [])
        if not any(t.get("key") == accelerator for t in tolerations):
            p.add(cw, "no toleration for %s" % accelerator)
    elif any(k.endswith("/gpu") for k in limits):
        p.add(cw, "a CPU worker asks for a GPU")
    server = env.get("QUANTD_SERVER")
    if not server or listen_port(server) != 50051:
        p.add(cw, "QUANTD_SERVER %r does not reach the quantd Service's gRPC port" % server)
    grace = obj["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
    if grace < 600:
        p.add(cw, "terminationGracePeriodSeconds %s is too short to drain a job" % grace)
    startup = c.get("startupProbe")
    if not startup:
        p.add(cw, "no startupProbe")
    else:
        budget = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
        if budget < 300:
            p.add(cw, "startupProbe allows %s s, too little for CUDA initialisation" % budget)
        argv = probe_argv(startup) or []
        check_flags(p, cw + " startupProbe", os.path.basename(argv[0]) if argv else "", argv[1:],
                    flags)
        if not flag_value(argv[1:], "tls_ca"):
            p.add(cw, "startupProbe runs without --tls-ca")
    if not any("ephemeral" in v or "persistentVolumeClaim" in v
               for v in obj["spec"]["template"]["spec"].get("volumes", [])
               if any(m["name"] == v["name"] and m["mountPath"] == flag_value(args, "data_dir")
                      for m in c.get("volumeMounts", []))):
        p.add(cw, "--data-dir is not on a PVC or ephemeral volume")


# A shipped certificate must outlive any checkout that uses it.
CERT_MIN_VALIDITY_S = 50 * 365 * 86400


def openssl(*args, stdin=None):
    return subprocess.run(["openssl"] + list(args), input=stdin, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True)


def certificate_names(cert_path):
    """The DNS and IP subjectAltNames of a PEM certificate."""
    out = openssl("x509", "-in", cert_path, "-noout", "-ext", "subjectAltName").stdout
    return set(re.findall(r"(?:DNS:|IP Address:)([^,\s]+)", out))


def check_tls_material(p, where, files, names):
    """files: {"cert", "key", "ca"} -> PEM paths. The certificate chains to
    the CA, belongs to the key and names every one of `names`."""
    r = openssl("verify", "-CAfile", files["ca"], files["cert"])
    if r.returncode != 0:
        p.add(where, "the certificate does not verify against ca.crt: %s" % r.stdout.strip())
    cert_key = openssl("x509", "-in", files["cert"], "-noout", "-pubkey").stdout
    key = openssl("pkey", "-in", files["key"], "-pubout").stdout
    if not cert_key.strip() or cert_key != key:
        p.add(where, "tls.key is not the key of tls.crt")
    missing = [n for n in names if n not in certificate_names(files["cert"])]
    if missing:
        p.add(where, "the certificate does not name %s (it names %s)" % (
            ", ".join(missing), sorted(certificate_names(files["cert"]))))


def check_tls_secrets(overlay, objects):
    """A TLS Secret the overlay ships (the dev one): valid for a long time,
    for every name the Service, the workers and the probes use."""
    import base64
    import tempfile
    p = Problems()
    secrets = {s["metadata"]["name"]: s for s in by_kind(objects, "Secret")}
    for obj, tmpl in pod_templates(objects):
        spec = tmpl["spec"]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in spec["containers"]:
            args = c.get("args", [])
            if not flag_value(args, "tls_cert"):
                continue
            mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
            want = {"cert": flag_value(args, "tls_cert"), "key": flag_value(args, "tls_key")}
            names = set(service_names(objects, tmpl)) | {"localhost", "127.0.0.1"}
            for n in PROBES:
                argv = probe_argv(c.get(n)) or []
                if flag_value(argv, "tls_ca"):
                    want["ca"] = flag_value(argv, "tls_ca")
                if flag_value(argv, "tls_server_name"):
                    names.add(flag_value(argv, "tls_server_name"))
            located = {k: secret_file(v or "", mounts, volumes) for k, v in want.items()}
            if "ca" not in want or any(not v or v[0] not in secrets for v in located.values()):
                continue  # the platform team's Secret: docs/deploy.md section 3
            where = "overlays/%s Secret/%s" % (overlay, located["cert"][0])
            with tempfile.TemporaryDirectory() as tmp:
                files = {}
                for k, (name, key) in located.items():
                    data = secrets[name].get("data", {}).get(key)
                    if data is None:
                        p.add(where, "has no key %s" % key)
                        continue
                    files[k] = os.path.join(tmp, k + ".pem")
                    with open(files[k], "wb") as f:
                        f.write(base64.b64decode(data))
                if len(files) < 3:
                    continue
                if secrets[located["cert"][0]].get("type") != "kubernetes.io/tls":
                    p.add(where, "is not of type kubernetes.io/tls")
                check_tls_material(p, where, files, sorted(names))
                if openssl("x509", "-in", files["cert"], "-noout", "-checkend",
                           str(CERT_MIN_VALIDITY_S)).returncode != 0:
                    p.add(where, "the certificate expires within 50 years")
    return p


def check_autoscaling(repo, rendered_overlay, addon_objects):
    """KEDA and HPA target the worker Deployment; the KEDA query fits the store."""
    p = Problems()
    deployments = {d["metadata"]["name"] for d in by_kind(rendered_overlay, "Deployment")}
    secrets_used = set()
    for so in by_kind(addon_objects["keda"], "ScaledObject"):
        target = so["spec"]["scaleTargetRef"]["name"]
        if target not in deployments:
            p.add("addons/keda", "ScaledObject scales %s, which is not a Deployment" % target)
        if so["spec"].get("minReplicaCount", 1) != 0:
            p.add("addons/keda", "ScaledObject does not scale to zero")
        for trig in so["spec"]["triggers"]:
            if trig["type"] != "postgresql":
                p.add("addons/keda", "trigger %s is not postgresql" % trig["type"])
            check_queue_query(p, repo, trig["metadata"]["query"])
    for ta in by_kind(addon_objects["keda"], "TriggerAuthentication"):
        for ref in ta["spec"]["secretTargetRef"]:
            secrets_used.add((ref["name"], ref["key"]))
    for hpa in by_kind(addon_objects["hpa"], "HorizontalPodAutoscaler"):
        if hpa["spec"]["scaleTargetRef"]["name"] not in deployments:
            p.add("addons/hpa", "HPA scales %s, which is not a Deployment" % hpa["spec"]["scaleTargetRef"])
        metrics = [m["external"]["metric"]["name"] for m in hpa["spec"]["metrics"]
                   if m["type"] == "External"]
        if metrics != ["quantd_queue_depth"]:
            p.add("addons/hpa", "HPA must scale on quantd_queue_depth, got %s" % metrics)
        if "quantd_queue_depth" not in read(repo, "server/metrics/quantd_metrics.cc"):
            p.add("addons/hpa", "quantd exports no quantd_queue_depth")
    for sm in by_kind(addon_objects["servicemonitor"], "ServiceMonitor"):
        services = [s for s in by_kind(rendered_overlay, "Service")
                    if sm["spec"]["selector"]["matchLabels"].items() <=
                    s["metadata"].get("labels", {}).items()]
        if not services:
            p.add("addons/servicemonitor", "selects no Service")
        for ep in sm["spec"]["endpoints"]:
            if not any(ep["port"] == pt.get("name") for s in services for pt in s["spec"]["ports"]):
                p.add("addons/servicemonitor", "endpoint port %s is no Service port" % ep["port"])
    return p, secrets_used


def check_queue_query(p, repo, query):
    """The table and columns exist in quantd's PostgreSQL schema and the
    state numbers are the queued/running/cancelling JobState values."""
    schema = read(repo, "server/store/postgres_job_store.cc")
    m = re.search(r"FROM (\w+) WHERE (\w+) IN \(([\d, ]+)\)", query)
    if not m:
        p.add("addons/keda", "cannot read the queue query %r" % query)
        return
    table, column, states = m.group(1), m.group(2), {int(s) for s in m.group(3).split(",")}
    table_def = re.search(r"CREATE TABLE %s \((.*?)\n\);" % table, schema, re.S)
    if not table_def or not re.search(r"^\s*%s\s" % column, table_def.group(1), re.M):
        p.add("addons/keda", "the store has no %s.%s" % (table, column))
    proto = read(repo, "proto/quantd/v1/job.proto")
    enum = dict((int(v), k) for k, v in re.findall(r"^\s*([A-Z_]+) = (\d+);",
                                                  re.search(r"enum JobState \{(.*?)\}", proto,
                                                            re.S).group(1), re.M))
    if {enum.get(s) for s in states} != {"QUEUED", "RUNNING", "CANCELLING"}:
        p.add("addons/keda", "query counts states %s, not QUEUED, RUNNING and CANCELLING" % sorted(
            enum.get(s) for s in states))


def check_build_script(repo, version, overlays_images):
    p = Problems()
    out = subprocess.run(
        ["bash", os.path.join(repo, "deploy/docker/build.sh"), "--dry-run", "--registry",
         "registry.example.com/quantd", "quantd", "worker-cpu", "worker-cuda", "worker-rocm"],
        stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    built = set()
    for line in out.splitlines():
        words = shlex.split(line)
        if "build" in words:
            tag = words[words.index("-t") + 1]
            dockerfile = os.path.basename(words[words.index("-f") + 1])
            registry, name, t = image_parts(tag)
            if DOCKERFILE_IMAGE.get(dockerfile) != name:
                p.add("build.sh", "%s is tagged %s" % (dockerfile, tag))
            if t != version:
                p.add("build.sh", "tags %s, quantd's version is %s" % (tag, version))
            built.add(tag)
    for image in sorted(overlays_images - built):
        p.add("build.sh", "the manifests deploy %s, which build.sh does not build" % image)
    return p


def yaml_files(repo):
    for root, _, files in os.walk(os.path.join(repo, "deploy")):
        for f in files:
            if f.endswith((".yaml", ".yml")):
                yield os.path.join(root, f)


def quantd_version(repo):
    return re.search(r'kQuantdVersion\[\] = "([^"]+)"',
                     read(repo, "server/metrics/quantd_metrics.h")).group(1)


def run_all(repo, binaries):
    """Every check; returns Problems."""
    p = Problems()
    for path in yaml_files(repo):
        try:
            with open(path) as f:
                list(yaml.safe_load_all(f))
        except yaml.YAMLError as e:
            p.add(os.path.relpath(path, repo), "does not parse: %s" % e)
    lint = subprocess.run(["yamllint", "-s", "-c", os.path.join(repo, "deploy/.yamllint"),
                           os.path.join(repo, "deploy")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if lint.returncode != 0:
        p.add("yamllint", lint.stdout)

    flags = {name: binary_flags(path) for name, path in binaries.items()}
    lib_packages = {}
    vendor_lib_packages = {}
    for name, path in binaries.items():
        lib_packages[name] = shared_library_packages(path)
        vendor_lib_packages[name] = shared_library_packages(
            path, skip_library=re.compile(r"^lib(torch|c10)"))
    images = {}
    for file_name, image in DOCKERFILE_IMAGE.items():
        text = read(repo, "deploy/docker/" + file_name)
        problems, argv, user = check_dockerfile(repo, file_name, text, flags, lib_packages,
                                                vendor_lib_packages)
        p.extend(problems)
        if argv:
            images[image] = (argv, user, runtime_files(text))

    version = quantd_version(repo)
    docs = read(repo, "docs/deploy.md")
    rendered = {}
    deployed_images = set()
    for overlay in OVERLAYS:
        rendered[overlay] = render(repo, "deploy/k8s/overlays/" + overlay)
        p.extend(check_overlay(overlay, rendered[overlay], flags, images, docs, version))
        p.extend(check_tls_secrets(overlay, rendered[overlay]))
        for _, tmpl in pod_templates(rendered[overlay]):
            for c in tmpl["spec"]["containers"]:
                if image_parts(c["image"])[1] in IMAGE_BINARY and overlay != "dev":
                    deployed_images.add(c["image"])
    addons = {a: render(repo, "deploy/k8s/addons/" + a) for a in ADDONS}
    autoscaling, keda_secrets = check_autoscaling(repo, rendered["nvidia"], addons)
    p.extend(autoscaling)
    dev_secrets = {s["metadata"]["name"]: set(s.get("data", {}))
                   for s in by_kind(rendered["dev"], "Secret")}
    documented = documented_secrets(docs)
    for name, key in sorted(keda_secrets):
        for label, secrets in (("overlays/dev", dev_secrets), ("docs/deploy.md", documented)):
            if key not in secrets.get(name, set()):
                p.add("addons/keda", "TriggerAuthentication reads %s/%s, missing in %s" % (
                    name, key, label))
    p.extend(check_build_script(repo, version, deployed_images))
    p.extend(mutations_are_caught(repo, flags, lib_packages, vendor_lib_packages, images,
                                  rendered, docs, version))
    return p


def mutations_are_caught(repo, flags, lib_packages, vendor_lib_packages, images, rendered, docs,
                         version):
    """The checks can fail: each broken copy of a real file must be reported."""
    p = Problems()
    quantd_dockerfile = read(repo, "deploy/docker/Dockerfile.quantd")
    dockerfile_mutations = [
        ("unpinned base", quantd_dockerfile.replace("debian:12.8-slim", "debian:latest"),
         "not pinned"),
        ("missing runtime library", quantd_dockerfile.replace("libpq5", "libpq-missing"),
         "runtime stage lacks libpq5"),
        ("build tool at run time", quantd_dockerfile.replace("ca-certificates", "ca-certificates g++"),
         "build tool g++"),
        ("unknown flag in CMD", quantd_dockerfile.replace("--metrics-listen=", "--metrics-port="),
         "--metrics-port is not a flag of quantd"),
        ("root user", quantd_dockerfile.replace("USER 10001:10001", "USER root"), "non-root"),
        ("missing COPY source", quantd_dockerfile.replace("COPY proto /src/proto",
                                                          "COPY protos /src/proto"),
         "COPY source protos"),
        ("unknown bazel target", quantd_dockerfile.replace("//server:quantd ", "//server:quantdd "),
         "//server:quantdd does not exist"),
        ("health probe flag", quantd_dockerfile.replace("--addr=127.0.0.1", "--address=127.0.0.1"),
         "--address is not a flag of quantd-health-probe"),
    ]
    cuda_dockerfile = read(repo, "deploy/docker/Dockerfile.worker-cuda")
    dockerfile_mutations.append(
        ("vendor lib not copied", cuda_dockerfile.replace("COPY --from=libtorch /opt/libtorch/lib",
                                                          "COPY --from=libtorch /opt/libtorch/include"),
         "copy its lib/"))
    for label, text, expected in dockerfile_mutations:
        found, _, _ = check_dockerfile(repo, "mutated", text, flags, lib_packages,
                                       vendor_lib_packages)
        if not any(expected in item for item in found.items):
            p.add("self-test", "a Dockerfile with %s passed (%s)" % (label, found.items))

    def mutated(overlay, edit):
        objects = yaml.safe_load_all(yaml.safe_dump_all(rendered[overlay]))
        objects = [o for o in objects if o]
        for obj, tmpl in pod_templates(objects):
            for c in tmpl["spec"]["containers"]:
                edit(obj, tmpl, c)
        return objects

    def worker(edit):
        return lambda obj, tmpl, c: edit(obj, tmpl, c) if c["name"] == "worker" else None

    def frontend(edit):
        return lambda obj, tmpl, c: edit(obj, tmpl, c) if c["name"] == "quantd" else None

    manifest_mutations = [
        ("nvidia", "unknown worker flag", worker(lambda o, t, c: c["args"].append("--gpu=0")),
         "--gpu is not a flag of quantd-worker"),
        ("nvidia", "no GPU limit", worker(lambda o, t, c: c["resources"]["limits"].pop("nvidia.com/gpu")),
         "nvidia.com/gpu: 1"),
        ("nvidia", "short grace", worker(lambda o, t, c: t["spec"].update(
            terminationGracePeriodSeconds=30)), "too short"),
        ("cpu", "probe on a wrong port", frontend(lambda o, t, c: c["readinessProbe"]["exec"].update(
            command=[a.replace(":50051", ":50052") for a in c["readinessProbe"]["exec"]["command"]])),
         "readinessProbe probes port 50052"),
        ("cpu", "probe the image lacks", frontend(lambda o, t, c: c["livenessProbe"][
            "exec"].update(command=["/usr/bin/quantd-health-probe"] + c["livenessProbe"]["exec"][
                "command"][1:])),
         "livenessProbe runs /usr/bin/quantd-health-probe, which image quantd does not ship"),
        ("cpu", "TLS flag removed", frontend(lambda o, t, c: c.update(
            args=[a for a in c["args"] if not a.startswith("--tls-cert=")])),
         "serves no TLS"),
        ("nvidia", "grpc probe put back", frontend(lambda o, t, c: c.update(
            livenessProbe={"grpc": {"port": 50051}, "periodSeconds": 10})),
         "livenessProbe is a plaintext gRPC probe"),
        ("amd", "probe without TLS", frontend(lambda o, t, c: c["startupProbe"]["exec"].update(
            command=[a for a in c["startupProbe"]["exec"]["command"]
                     if not a.startswith("--tls-ca=")])),
         "startupProbe runs without --tls-ca"),
        ("cpu", "probe checks another name", frontend(lambda o, t, c: c["readinessProbe"][
            "exec"].update(command=[a.replace("--tls-server-name=quantd", "--tls-server-name=x")
                                    for a in c["readinessProbe"]["exec"]["command"]])),
         "verifies the name x"),
        ("cpu", "TLS key outside a Secret", frontend(lambda o, t, c: c.update(
            args=[a.replace("/etc/quantd/tls/", "/var/lib/quantd/") for a in c["args"]])),
         "--tls-key=/var/lib/quantd/tls.key is not inside a mounted Secret"),
        ("cpu", "worker without TLS", worker(lambda o, t, c: c.update(
            args=[a for a in c["args"] if not a.startswith("--tls-ca=")])),
         "without TLS (no --tls-ca)"),
        ("dev", "server key in a worker", worker(lambda o, t, c: [
            v["secret"].pop("items") for v in t["spec"]["volumes"]
            if v.get("secret", {}).get("secretName") == "quantd-tls"]),
         "mounts tls.key of Secret quantd-tls"),
        ("nvidia", "worker startupProbe without TLS", worker(lambda o, t, c: c[
            "startupProbe"]["exec"].update(command=[a.replace("--tls-ca=/etc/quantd/tls/ca.crt", "")
                                                    for a in c["startupProbe"]["exec"]["command"]])),
         "startupProbe runs without --tls-ca"),
        ("cpu", "missing Secret", frontend(lambda o, t, c: t["spec"]["volumes"][0]["secret"].update(
            secretName="quantd-tokens")), "Secret quantd-tokens"),
        ("dev", "missing Secret key", frontend(lambda o, t, c: c["env"][0]["valueFrom"]["secretKeyRef"]
                                               .update(key="hostname")), "key hostname"),
        ("cpu", "other image tag", frontend(lambda o, t, c: c.update(
            image=c["image"].rsplit(":", 1)[0] + ":9.9.9")), "not tagged with quantd's version"),
        ("cpu", "unmounted URI root", frontend(lambda o, t, c: c["volumeMounts"].pop()),
         "root file:///models is on no mounted volume"),
        ("cpu", "no requests", frontend(lambda o, t, c: c["resources"].pop("requests")),
         "no cpu request"),
        ("cpu", "one frontend", frontend(lambda o, t, c: o["spec"].update(replicas=1)),
         "at least 2 replicas"),
        ("cpu", "undefined variable", frontend(lambda o, t, c: c["args"].append(
            "--log-level=$(QUANTD_VERBOSITY)")), "$(QUANTD_VERBOSITY)"),
    ]
    for overlay, label, edit, expected in manifest_mutations:
        try:
            objects = mutated(overlay, edit)
        except (KeyError, IndexError, TypeError) as e:
            # The real files no longer have what the mutation edits; the
            # checks above say why.
            p.add("self-test", "cannot make overlay %s with %s: no %s" % (overlay, label, e))
            continue
        found = check_overlay(overlay, objects, flags, images, docs, version)
        if not any(expected in item for item in found.items):
            p.add("self-test", "overlay %s with %s passed (%s)" % (overlay, label, found.items))

    # The dev overlay's TLS Secret, broken: another certificate, a short one.
    def tls_secret(edit):
        objects = [o for o in yaml.safe_load_all(yaml.safe_dump_all(rendered["dev"])) if o]
        for s in by_kind(objects, "Secret"):
            if s["metadata"]["name"] == "quantd-tls":
                edit(s["data"])
        return objects

    short = short_lived_certificate()
    secret_mutations = [
        ("the CA as the server certificate", lambda d: d.update({"tls.crt": d["ca.crt"]}),
         "tls.key is not the key of tls.crt"),
        ("a certificate for other names", lambda d: d.update(short),
         "does not name 127.0.0.1, localhost, quantd,"),
        ("a certificate of a month", lambda d: d.update(short), "expires within 50 years"),
    ]
    for label, edit, expected in secret_mutations:
        found = check_tls_secrets("dev", tls_secret(edit))
        if not any(expected in item for item in found.items):
            p.add("self-test", "overlays/dev with %s passed (%s)" % (label, found.items))
    return p


def short_lived_certificate():
    """Base64 tls.crt, tls.key and ca.crt of a self-signed certificate for
    other.example, valid for 30 days."""
    import base64
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        key, crt = os.path.join(tmp, "k.pem"), os.path.join(tmp, "c.pem")
        r = openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "30", "-subj", "/CN=other.example", "-addext",
                    "subjectAltName=DNS:other.example", "-keyout", key, "-out", crt)
        if r.returncode != 0:
            raise RuntimeError("openssl req failed: " + r.stdout)
        data = {}
        for k, path in (("tls.crt", crt), ("tls.key", key), ("ca.crt", crt)):
            with open(path, "rb") as f:
                data[k] = base64.b64encode(f.read()).decode()
        return data


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="repository root")
    parser.add_argument("--binary", action="append", default=[], help="NAME=PATH (quantd, "
                        "quantd-worker, quantd-health-probe)")
    opts = parser.parse_args(argv)
    binaries = dict(b.split("=", 1) for b in opts.binary)
    problems = run_all(opts.repo, binaries)
    for item in problems.items:
        print("FAIL " + item)
    print("%d problem(s)" % len(problems.items))
    return 1 if problems.items else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
