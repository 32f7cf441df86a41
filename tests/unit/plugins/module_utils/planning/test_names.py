# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each label, annotation and field manager is spelt once: in names.py.

The code under plugins/ (Python, read with tokenize: string literals only, comments and documentation left out)
and roles/ (YAML, parsed: comments gone, argument documentation left out) must not spell any of them again.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import io
import os
import re
import tokenize

import pytest
import yaml

from ansible_collections.kubegpu.platform.plugins.module_utils.planning import names

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 5))
NAMES_FILE = os.path.join(ROOT, "plugins", "module_utils", "planning", "names.py")
# Module documentation is prose for people (ansible-doc), as docstrings are.
DOC_VARIABLES = ("DOCUMENTATION", "EXAMPLES", "RETURN")
# Keys whose values are prose or Galaxy metadata in a role's meta/ (argument_specs.yml, main.yml).
DOC_KEYS = ("description", "short_description", "galaxy_info")

WATCHED = dict((value, kind) for kind, values in (("label", names.LABELS), ("annotation", names.ANNOTATIONS),
                                                  ("field manager", names.FIELD_MANAGERS)) for value in values)


def _pattern(watched):
    """A name inside a string: not part of a longer name (kubegpu.platform.gpu_node_pools is a module, not the
    field manager); a prefix (nvidia.com/gpu.deploy.) matches at the start of whatever follows it."""
    parts = []
    for value in sorted(watched, key=len, reverse=True):
        tail = "" if value.endswith((".", "-", "/")) else r"(?![A-Za-z0-9_-]|\.[A-Za-z0-9])"
        parts.append(re.escape(value) + tail)
    return re.compile(r"(?<![A-Za-z0-9_./-])(?:%s)" % "|".join(parts))


PATTERN = _pattern(WATCHED)


def _files(top, suffixes):
    for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(suffixes):
                yield os.path.join(folder, name)


def _documentation_lines(source):
    """Line ranges of docstrings and of module documentation assignments, which tokenize cannot tell apart."""
    ranges = []
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            ranges.append((body[0].lineno, body[0].end_lineno))
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in DOC_VARIABLES for t in node.targets):
            ranges.append((node.lineno, node.end_lineno))
    return ranges


def python_literals(path):
    """(line, text) of every string literal of a Python file, outside docstrings and module documentation."""
    with open(path) as f:
        source = f.read()
    skip = _documentation_lines(source)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.STRING:
            continue
        line = token.start[0]
        if any(first <= line <= last for first, last in skip):
            continue
        try:
            text = ast.literal_eval(token.string)
        except (ValueError, SyntaxError):   # an f-string: its text as written
            text = token.string
        yield line, text if isinstance(text, str) else text.decode("utf-8", "replace")


def _walk(value, skip_docs, path=""):
    """(where, text) of every key and string value under value; skip_docs leaves out the DOC_KEYS' values."""
    if isinstance(value, dict):
        for key, item in value.items():
            where = "%s.%s" % (path, key) if path else str(key)
            yield where, str(key)
            if not (skip_docs and key in DOC_KEYS):
                yield from _walk(item, skip_docs, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, skip_docs, "%s[%d]" % (path, index))
    elif isinstance(value, str):
        yield path, value


def yaml_strings(path):
    """(where, text) of every key and string value of a role's YAML file, its metadata's prose left out."""
    with open(path) as f:
        documents = list(yaml.safe_load_all(f))
    in_meta = os.path.basename(os.path.dirname(path)) == "meta"
    for document in documents:
        yield from _walk(document, in_meta)


def spelt_again():
    """Every place under plugins/ and roles/ that spells a watched name, as 'path:where: name (kind)'."""
    found = []
    for path in _files("plugins", (".py",)):
        if os.path.samefile(path, NAMES_FILE):
            continue
        for line, text in python_literals(path):
            for match in PATTERN.finditer(text):
                found.append("%s:%d: %s" % (os.path.relpath(path, ROOT), line, match.group(0)))
    for path in _files("roles", (".yml", ".yaml")):
        for where, text in yaml_strings(path):
            for match in PATTERN.finditer(text):
                found.append("%s: %s: %s" % (os.path.relpath(path, ROOT), where, match.group(0)))
    return found


def test_each_name_is_spelt_once():
    found = spelt_again()
    assert not found, (
        "labels, annotations and field managers are spelt in plugins/module_utils/planning/names.py only; import "
        "them from there (roles: take them from a module's result or option default, or "
        "lookup('kubegpu.platform.names', ...)). Spelt again at:\n  " + "\n  ".join(found))


def test_names_are_distinct():
    values = list(WATCHED)
    assert len(values) == len(names.LABELS) + len(names.ANNOTATIONS) + len(names.FIELD_MANAGERS)


def test_field_managers_are_the_collection_and_its_stages():
    assert names.FIELD_MANAGER == names.COLLECTION
    assert all(m.startswith(names.COLLECTION + "/") for m in names.FIELD_MANAGERS if m != names.FIELD_MANAGER)


@pytest.mark.parametrize("text, spelt", [
    ("kubegpu.io/node-pool", ["kubegpu.io/node-pool"]),
    ("kubegpu.io/node-pool=llm", ["kubegpu.io/node-pool"]),
    ("nvidia.com/mig.config.state", ["nvidia.com/mig.config.state"]),
    ("nvidia.com/mig.config=all-disabled", ["nvidia.com/mig.config"]),
    ("nvidia.com/gpu.deploy.dcgm", ["nvidia.com/gpu.deploy."]),
    ("kubegpu.platform", ["kubegpu.platform"]),
    ("kubegpu.platform/dra", ["kubegpu.platform/dra"]),
    # Module names, other labels and resources are not ours to watch.
    ("kubegpu.platform.gpu_node_pools", []),
    ("ansible_collections.kubegpu.platform.plugins", []),
    ("nvidia.com/gpu", []),
    ("devcluster.kubegpu.io/node-pool", []),
])
def test_pattern(text, spelt):
    assert [m.group(0) for m in PATTERN.finditer(text)] == spelt


def test_documentation_and_comments_are_left_out(tmp_path):
    source = tmp_path / "module.py"
    source.write_text('"""Labels kubegpu.io/node-pool."""\n'
                      'DOCUMENTATION = r"""\nC(kubegpu.io/node-pool)\n"""\n'
                      '# kubegpu.io/node-pool\n'
                      'def f():\n    """kubegpu.io/node-pool"""\n    return "kubegpu.io/node-pool"\n')
    found = [text for dummy, text in python_literals(str(source)) if PATTERN.search(text)]
    assert found == ["kubegpu.io/node-pool"]
