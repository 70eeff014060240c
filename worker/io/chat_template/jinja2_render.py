"""The parity test's reference: jinja2 configured as transformers
configures it for chat templates.

jinja2_render.py TEMPLATE_FILE CONTEXT_JSON_FILE
    prints the rendering, or the error on stderr and exits 1.
jinja2_render.py --snippets SNIPPETS_FILE CONTEXT_JSON_FILE OUT_DIR
    splits SNIPPETS_FILE at lines "====" into OUT_DIR/N.jinja and renders
    each in this one process into OUT_DIR/N.out and OUT_DIR/N.rc.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def load_context(path):
    with open(path, encoding="utf-8") as f:
        # Key order as in the file, as transformers loads it; the engine's
        # CLI reads an nlohmann::ordered_json to match.
        return json.load(f)


def render(source, context):
    """Returns (rendering, None) or (None, error text)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    try:
        return env.from_string(source).render(**context), None
    except Exception as e:  # pylint: disable=broad-except
        return None, f"{type(e).__name__}: {e}"


def main():
    if sys.argv[1] == "--snippets":
        with open(sys.argv[2], encoding="utf-8") as f:
            snippets = f.read().split("\n====\n")
        context = load_context(sys.argv[3])
        out_dir = sys.argv[4]
        for i, source in enumerate(snippets):
            with open(f"{out_dir}/{i}.jinja", "w", encoding="utf-8") as f:
                f.write(source)
            out, err = render(source, context)
            with open(f"{out_dir}/{i}.out", "w", encoding="utf-8") as f:
                f.write(out if err is None else err)
            with open(f"{out_dir}/{i}.rc", "w", encoding="utf-8") as f:
                f.write("0" if err is None else "1")
        return 0
    with open(sys.argv[1], encoding="utf-8") as f:
        source = f.read()
    out, err = render(source, load_context(sys.argv[2]))
    if err is not None:
        sys.stderr.write(err + "\n")
        return 1
    sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
