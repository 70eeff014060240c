#!/usr/bin/python3
"""The example sessions in README.md and docs/*.md, run against the real
programs and compared with what the docs show.

A checked example is a fenced block right after a marker line

    <!-- docs-test: NAME [server=tour|auth|http] -->

whose lines are `$ command` (a line ending in a backslash continues on the
next) followed by what the command prints, stdout and stderr together as a
terminal shows them. Every fenced block holding a `$ ` line must be marked,
so a new example cannot escape the test. The commands run in bash, in order,
in a directory holding the bundled model (models/), texts (tests/data/) and
configs (docs/examples/), the Python SDK and its example (client/python/),
with `quantctl` on PATH and QUANTD_SERVER naming a
quantd started for the test:

  tour: SQLite store, --local-workers=1 (the README's tour);
  auth: --auth-tokens with one token for tenant acme, in $TOKEN;
  http: no workers (jobs stay QUEUED), --http-listen; the docs' 127.0.0.1:8080
        is its HTTP address and /work/main in a command the directory.

`$?` is the exit status of the previous command of the block.

What may differ between a run and the docs:
  - a line `...` stands for any number of lines;
  - `...` inside a line stands for any text;
  - job ids (also bare, as in artifact directories), timestamps, durations,
    artifact hashes and the dates in artifact names compare as fixed tokens
    (<id>, <time>, ...) on both sides; a job id shown in an output and used
    in a later command is replaced by the id of the run;
  - the directory the commands run in is written /work/main, the host name
    vm;
  - runs of spaces compare as one space (column widths follow the values);
  - a number with a decimal point may differ by two units of its last
    printed digit: the measurements are float32 sums whose order follows the
    thread count, so the printed value can round either way on either side.
    Integers compare exactly.

When the program's output changes on purpose, regenerate the blocks:

    bazel run //tests/docs:docs_examples_test -- --update

rewrites, in the source tree, every command output that no longer matches
with all that the program printed (outputs that still match are kept as
written); shorten long ones again with `...`.
"""

import difflib
import os
import re
import socket
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client",
                                "python", "testing"))
import live_quantd  # noqa: E402

# align() recurses once per line of an output.
sys.setrecursionlimit(100000)

DOC_FILES = ["README.md"] + sorted(
    os.path.join("docs", f) for f in os.listdir(live_quantd.runfile("docs")) if f.endswith(".md"))
# DOCS_EXAMPLES_FILES=docs/a.md,docs/b.md checks only those (e.g. while
# writing one doc: bazel test --test_env=DOCS_EXAMPLES_FILES=...).
if os.environ.get("DOCS_EXAMPLES_FILES"):
    DOC_FILES = [f for f in DOC_FILES if f in os.environ["DOCS_EXAMPLES_FILES"].split(",")]
DOC_ROOT = "/work/main"
DOC_HOST = "vm"
REGENERATE = "bazel run //tests/docs:docs_examples_test -- --update"
# A generous ceiling for one command (a whole quantization job on a loaded
# 2-core machine), not a budget.
COMMAND_CEILING_S = 1800

MARKER = re.compile(r"^<!-- docs-test: (\S+)((?: \w+=\S+)*) -->$")
JOB_ID = re.compile(r"jobs/[0-9a-z]{26}\b")
BARE_ID = re.compile(r"\b[0-9a-z]{26}\b")
# What varies from run to run, and the token both sides compare as.
RUN_VARYING = [
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<time>"),
    (re.compile(r"-\d{8}-\d{6}\b"), "-<date>"),
    (re.compile(r"\bsha256 [0-9a-f]{16,64}\b"), "sha256 <hash>"),
    (re.compile(r"\b(\d+h)?(\d+m)?\d+(\.\d+)? ?(s|ms)\b"), "<duration>"),
]
NUMBER = re.compile(r"[-+]?\d+(?:\.(\d+))?(?:e[-+]?\d+)?")


class Block:
    def __init__(self, path, line, name, attrs, body_start, body):
        self.path, self.line, self.name, self.attrs = path, line, name, attrs
        self.body_start = body_start  # index of the first body line in the file
        self.body = body  # the lines between the fences
        self.server = attrs.get("server", "tour")

    def where(self):
        return f"{self.path}:{self.line} (block '{self.name}')"

    def commands(self):
        """[(command, [expected lines], index of the first output line in body)]."""
        out, i = [], 0
        while i < len(self.body):
            if not self.body[i].startswith("$ "):
                raise AssertionError(f"{self.where()}: expected a '$ command' line, got "
                                     f"{self.body[i]!r}")
            cmd = self.body[i][2:]
            while cmd.endswith("\\") and i + 1 < len(self.body):
                i += 1
                cmd += "\n" + self.body[i]
            i += 1
            start = i
            while i < len(self.body) and not self.body[i].startswith("$ "):
                i += 1
            out.append((cmd, self.body[start:i], start))
        return out


def read_blocks(root, relative):
    """The file's lines and its marked blocks; AssertionError for an
    unmarked example session."""
    with open(os.path.join(root, relative)) as f:
        lines = f.read().split("\n")
    blocks, i, marker = [], 0, None
    while i < len(lines):
        m = MARKER.match(lines[i])
        if m:
            marker = (i + 1, m.group(1), dict(a.split("=", 1) for a in m.group(2).split()))
        elif lines[i].startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            body = lines[i + 1:j]
            if marker is not None:
                blocks.append(Block(relative, marker[0], marker[1], marker[2], i + 1, body))
            elif any(l.startswith("$ ") for l in body):
                raise AssertionError(
                    f"{relative}:{i + 1}: an example session without a '<!-- docs-test: NAME -->' "
                    "marker (tests/docs/docs_examples_test.py runs marked ones)")
            marker = None
            i = j
        elif lines[i].strip():
            marker = None  # a marker belongs to the block right after it
        i += 1
    return lines, blocks


def normalize(line):
    line = JOB_ID.sub("jobs/<id>", line)
    line = BARE_ID.sub("<id>", line)  # e.g. the default artifact directory
    for pattern, token in RUN_VARYING:
        line = pattern.sub(token, line)
    return " ".join(line.split())


def numbers_close(expected, actual):
    if expected == actual:
        return True
    e, a = NUMBER.fullmatch(expected), NUMBER.fullmatch(actual)
    if not e or not a or e.group(1) is None or a.group(1) is None:
        return False
    if len(e.group(1)) != len(a.group(1)) or ("e" in expected) != ("e" in actual):
        return False
    if "e" in expected:  # mantissa digits: a relative unit
        unit = abs(float(expected)) * 10 ** -len(e.group(1))
    else:
        unit = 10 ** -len(e.group(1))
    return abs(float(expected) - float(actual)) <= 2 * unit * (1 + 1e-9)


def line_matches(expected, actual):
    """Whether an output line matches its docs line (normalized, with inline
    `...` wildcards and number tolerances)."""
    e, a = normalize(expected), normalize(actual)
    if e == a:
        return True
    # Split the expected line into literal text and numbers; `...` is any text.
    pattern, numbers = "", []
    for piece in re.split(r"(\.\.\.|" + NUMBER.pattern.replace("(\\d+)", "(?:\\d+)") + ")", e):
        if piece == "...":
            pattern += "(?:.*?)"
        elif piece and NUMBER.fullmatch(piece):
            pattern += "(" + NUMBER.pattern.replace("(\\d+)", "(?:\\d+)") + ")"
            numbers.append(piece)
        else:
            pattern += re.escape(piece)
    m = re.fullmatch(pattern, a)
    return bool(m) and all(numbers_close(x, y) for x, y in zip(numbers, m.groups()))


def align(expected, actual):
    """How `actual` lines up with `expected`: for each expected line the
    index of its actual line (None for `...`), or None when they do not match.
    Also returns the furthest expected line any alignment reached."""
    memo, furthest = {}, [0]

    def go(i, j):
        furthest[0] = max(furthest[0], i)
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(expected):
            result = [] if j == len(actual) else None
        elif expected[i] == "...":
            result = None
            for k in range(j, len(actual) + 1):
                rest = go(i + 1, k)
                if rest is not None:
                    result = [None] + rest
                    break
        elif j < len(actual) and line_matches(expected[i], actual[j]):
            rest = go(i + 1, j + 1)
            result = None if rest is None else [j] + rest
        else:
            result = None
        memo[(i, j)] = result
        return result

    return go(0, 0), furthest[0]


def match_output(expected, actual):
    """None when `actual` matches `expected`, else (index of the first
    expected line no alignment gets past, what is wrong)."""
    lines, furthest = align(expected, actual)
    if lines is not None:
        return None
    if furthest < len(expected):
        return (furthest, f"no output line matches: {expected[furthest]}")
    return (None, "output goes on after the last line shown")


def regenerate(expected, actual):
    """The docs lines for `actual`: the docs' lines (and their `...`) kept
    when the output still matches them, else the whole output."""
    return list(expected) if align(expected, actual)[0] is not None else list(actual)


class Session:
    """A working directory, quantctl on PATH and the quantd servers."""

    def __init__(self):
        base = live_quantd.temp_dir("docs_examples")
        self.root = os.path.join(base, "main")
        self.bin = os.path.join(base, "bin")
        self.home = os.path.join(base, "home")
        for d in (self.root, self.bin, self.home, os.path.join(self.root, "tests"),
                  os.path.join(self.root, "client")):
            os.makedirs(d, exist_ok=True)
        links = {
            os.path.join(self.root, "models"): live_quantd.runfile("models"),
            os.path.join(self.root, "tests", "data"): live_quantd.runfile("tests/data"),
            os.path.join(self.root, "docs"): live_quantd.runfile("docs"),
            # The Python SDK with its generated code, as client/python/generate.sh
            # leaves it in a checkout.
            os.path.join(self.root, "client", "python"): live_quantd.runfile("client/python"),
            os.path.join(self.bin, "quantctl"): live_quantd.runfile("client/quantctl/quantctl"),
        }
        for link, target in links.items():
            if not os.path.lexists(link):
                os.symlink(target, link)
        # Paths a job reports may be the ones the links resolve to.
        model = os.path.realpath(live_quantd.runfile("models/stories260K"))
        self.source_root = model[:-len("/models/stories260K")]
        self.servers = {}
        self.substitutions = {}  # server -> {text in the docs' commands: text run}
        self.token = "docs-example-token-5e1d"

    def server(self, kind):
        if kind not in self.servers:
            if kind == "tour":
                q = live_quantd.LiveQuantd("docs_examples/main/demo-data", local_workers=1)
            elif kind == "auth":
                tokens = os.path.join(self.home, "tokens")
                live_quantd.write_tokens_file(tokens, self.token)
                q = live_quantd.LiveQuantd(
                    "docs_examples/auth-data", local_workers=1,
                    extra_flags=[f"--auth-tokens={tokens}", "--metrics-listen=127.0.0.1:0"])
                with open(os.path.join(q.data_dir, "port")) as f:
                    metrics_port = f.read().split()[1]
                # The docs show /metrics on port 9090.
                self.substitutions["auth"] = {"127.0.0.1:9090": f"127.0.0.1:{metrics_port}"}
            elif kind == "http":
                q = live_quantd.LiveQuantd("docs_examples/http-data",
                                           extra_flags=["--http-listen=127.0.0.1:0"])
                with open(os.path.join(q.data_dir, "port")) as f:
                    http_port = f.read().split()[2]
                # The docs show the HTTP face on port 8080 and absolute paths
                # under /work/main.
                self.substitutions["http"] = {"127.0.0.1:8080": f"127.0.0.1:{http_port}",
                                              DOC_ROOT: self.root}
            else:
                raise AssertionError(f"unknown server '{kind}'")
            self.servers[kind] = q
        return self.servers[kind]

    def stop(self):
        for q in self.servers.values():
            q.stop()

    def run(self, command, server, previous_status):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("QUANTD_", "QUANTCTL_"))}
        env.update({
            "PATH": self.bin + os.pathsep + env.get("PATH", "/usr/bin:/bin"),
            "HOME": self.home,
            "QUANTD_SERVER": server.address,
            "TOKEN": self.token,
        })
        r = subprocess.run(["bash", "-c", f"(exit {previous_status}); {command}"],
                           cwd=self.root, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=COMMAND_CEILING_S)
        text = r.stdout.decode(errors="replace")
        for path in sorted({self.root, os.path.realpath(self.root), self.source_root}, key=len,
                           reverse=True):
            text = text.replace(path, DOC_ROOT)
        text = re.sub(r"\b" + re.escape(socket.gethostname()) + r"\b", DOC_HOST, text)
        lines = text.split("\n")
        while lines and not lines[-1].strip():  # trailing blank lines show nothing
            lines.pop()
        return r.returncode, lines


def run_block(session, block):
    """[(command, expected, actual, first output line in body)] of a block."""
    server = session.server(block.server)
    ids, status, results = {}, 0, []
    for doc_cmd, expected, start in block.commands():
        cmd = doc_cmd
        for doc_text, real_text in list(ids.items()) + list(
                session.substitutions.get(block.server, {}).items()):
            cmd = cmd.replace(doc_text, real_text)
        status, actual = session.run(cmd, server, status)
        for e, a in zip(expected, actual):
            for doc_id, real_id in zip(JOB_ID.findall(e), JOB_ID.findall(a)):
                ids.setdefault(doc_id, real_id)
        # Regenerated docs keep their own ids.
        for doc_id, real_id in ids.items():
            actual = [line.replace(real_id[len("jobs/"):], doc_id[len("jobs/"):])
                      for line in actual]
        results.append((doc_cmd, expected, actual, start))
    return results


def all_blocks(root):
    files = {}
    for relative in DOC_FILES:
        files[relative] = read_blocks(root, relative)
    return files


class DocsExamplesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.session = Session()

    @classmethod
    def tearDownClass(cls):
        cls.session.stop()

    def test_the_examples_print_what_the_docs_show(self):
        files = all_blocks(live_quantd.runfiles_root())
        checked = []
        failures = []
        for relative, (_, blocks) in files.items():
            for block in blocks:
                checked.append(block.where())
                for cmd, expected, actual, start in run_block(self.session, block):
                    bad = match_output(expected, actual)
                    if bad is None:
                        continue
                    index, what = bad
                    line = block.body_start + 1 + (start + index if index is not None else start)
                    diff = "\n".join(difflib.unified_diff(expected, actual, "docs", "actual",
                                                          lineterm=""))
                    failures.append(
                        f"{block.where()}, output of `$ {cmd}` differs at {relative}:{line}: "
                        f"{what}\n{diff}")
        print("checked blocks:\n  " + "\n  ".join(checked))
        self.assertTrue(checked, "no marked example blocks found")
        if failures:
            self.fail("\n\n".join(failures) + "\n\nIf the program's new output is right, "
                      f"regenerate the docs' examples with\n    {REGENERATE}")

    def test_a_marker_covers_every_example_session(self):
        # read_blocks raises for an unmarked block with `$ ` lines.
        for relative in DOC_FILES:
            read_blocks(live_quantd.runfiles_root(), relative)


class MatcherTest(unittest.TestCase):
    def test_run_varying_text_tolerances_and_elisions(self):
        self.assertTrue(line_matches("name: jobs/01m8104jkp2hxp3v0c4r213bcp  at 2026-11-22T06:47:14Z",
                                     "name: jobs/01m8d4n9jwhjn3r5jg6nvznz86 at 2026-11-26T23:57:09Z"))
        self.assertTrue(line_matches("load 0.1s, evaluate 16.7s, ran 2 s",
                                     "load 0.6s, evaluate 13m06s, ran 1h02m03s"))
        self.assertTrue(line_matches("ppl 8.3079 (+18.88%)", "ppl 8.3081 (+18.89%)"))
        self.assertFalse(line_matches("ppl 8.3079", "ppl 8.3082"))  # three units
        self.assertFalse(line_matches("5 blocks", "6 blocks"))  # integers are exact
        self.assertTrue(line_matches("rel-mse 1.810e-02", "rel-mse 1.811e-02"))
        self.assertTrue(line_matches("known: a, b, ...", "known: a, b, c, d"))
        self.assertFalse(line_matches("unknown scheme 'x'; supported: ...",
                                      "unknown quantization scheme 'x'; known: a"))
        self.assertIsNone(match_output(["a", "...", "d", "..."], ["a", "b", "c", "d", "e"]))
        self.assertIsNone(match_output(["a", "...", "b"], ["a", "b"]))
        self.assertEqual(match_output(["a", "...", "x"], ["a", "b"])[0], 2)
        self.assertEqual(match_output(["a"], ["a", "b"])[0], None)
        self.assertEqual(regenerate(["a", "...", "x"], ["a", "b"]), ["a", "b"])
        self.assertEqual(regenerate(["a", "..."], ["a", "b"]), ["a", "..."])


def update(source_root):
    session = Session()
    try:
        for relative, (lines, blocks) in all_blocks(source_root).items():
            changed = False
            # Run in order (later commands use earlier results), then edit
            # from the end so that earlier line numbers stay valid.
            runs = [(block, run_block(session, block)) for block in blocks]
            for block, results in reversed(runs):
                body = list(block.body)
                for cmd, expected, actual, start in reversed(results):
                    new = regenerate(expected, actual)
                    if new != expected:
                        body[start:start + len(expected)] = new
                        changed = True
                lines[block.body_start:block.body_start + len(block.body)] = body
            if changed:
                with open(os.path.join(source_root, relative), "w") as f:
                    f.write("\n".join(lines))
                print(f"updated {relative}")
    finally:
        session.stop()


if __name__ == "__main__":
    if "--update" in sys.argv:
        workspace = os.environ.get("BUILD_WORKSPACE_DIRECTORY")
        if not workspace:
            sys.exit("--update rewrites the source tree: run it with bazel run")
        update(workspace)
    else:
        unittest.main()
