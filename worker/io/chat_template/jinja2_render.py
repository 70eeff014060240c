"""jinja2_render.py TEMPLATE_FILE CONTEXT_JSON_FILE: renders with jinja2
configured as transformers configures it for chat templates; prints the
rendering, or the error on stderr and exits 1 (the parity test's reference).
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


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        source = f.read()
    with open(sys.argv[2], encoding="utf-8") as f:
        # The engine takes an nlohmann::json, whose objects iterate in key
        # order; sort here too so that both sides see the same dicts.
        context = json.loads(f.read(), object_pairs_hook=lambda kv: dict(sorted(kv)))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    try:
        out = env.from_string(source).render(**context)
    except Exception as e:  # pylint: disable=broad-except
        sys.stderr.write(f"{type(e).__name__}: {e}\n")
        return 1
    sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
