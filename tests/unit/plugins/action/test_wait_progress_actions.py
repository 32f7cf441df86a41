# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Every module that waits in rounds (it takes wait_round) has an action plugin of its name that prints each round's
# progress, and that plugin is the one file the others link to: a new waiting module needs only its link.
import os
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[4]
ACTIONS = REPO / "plugins" / "action"
SHARED = "gpu_node_pools.py"


def _documentation(module):
    text = module.read_text()
    start = text.index('DOCUMENTATION = r"""') + len('DOCUMENTATION = r"""')
    return yaml.safe_load(text[start:text.index('"""', start)])


def _waits_in_rounds(module):
    """wait_round among its options, its own or those of the wait doc fragment it extends."""
    doc = _documentation(module)
    return "wait_round" in (doc.get("options") or {}) or \
        "kubegpu.platform.wait" in (doc.get("extends_documentation_fragment") or [])


def _waiting_modules():
    return sorted(m.stem for m in (REPO / "plugins" / "modules").glob("*.py") if _waits_in_rounds(m))


def test_every_module_that_waits_in_rounds_has_the_progress_action_plugin():
    modules = _waiting_modules()
    assert "gpu_node_pools" in modules and len(modules) >= 8, modules
    for name in modules:
        plugin = ACTIONS / (name + ".py")
        assert plugin.exists(), "%s waits in rounds but has no action plugin to print its progress" % name
        assert os.path.realpath(plugin) == os.path.realpath(ACTIONS / SHARED), name


def test_the_links_stay_inside_the_folder_and_only_the_shared_file_is_real():
    for plugin in sorted(ACTIONS.glob("*.py")):
        if plugin.is_symlink():
            assert os.readlink(plugin) == SHARED, plugin.name      # relative: it survives the collection's build
    real = sorted(p.name for p in ACTIONS.glob("*.py") if not p.is_symlink())
    assert real == ["gpu_node_pools.py", "preflight.py"], real
