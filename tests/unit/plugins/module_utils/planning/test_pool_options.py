# -*- coding: utf-8 -*-
"""The pools' keys, types and choices are written once for people (the gpu_node_pools module's DOCUMENTATION, from
which tools/pool_schema.py generates the node_pools role's meta/argument_specs.yml) and once for the code
(node_pools/spec.py's POOL_OPTIONS, which the module's argument_spec and the inventory check use): these tests keep
them the same."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from pathlib import Path

import yaml

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import POOL_OPTIONS
from ansible_collections.kubegpu.platform.plugins.modules import gpu_node_pools

REPO = Path(__file__).resolve().parents[5]
FIELDS = ("type", "elements", "choices", "required", "default")


def _shape(options, nested):
    """{key: {type, elements, choices, required, default, options}} with Ansible's defaults made explicit."""
    out = {}
    for key, spec in options.items():
        entry = dict((field, spec.get(field)) for field in FIELDS)
        entry["required"] = bool(entry["required"])
        entry["choices"] = list(entry["choices"]) if entry["choices"] is not None else None
        if spec.get(nested) is not None:
            entry["options"] = _shape(spec[nested], nested)
        out[key] = entry
    return out


def test_module_documentation_matches_pool_spec():
    doc = yaml.safe_load(gpu_node_pools.DOCUMENTATION)["options"]["pools"]
    assert _shape(doc["suboptions"], "suboptions") == _shape(POOL_OPTIONS, "options")


def test_role_argument_spec_matches_pool_spec():
    specs = yaml.safe_load((REPO / "roles" / "node_pools" / "meta" / "argument_specs.yml").read_text())
    pools = specs["argument_specs"]["main"]["options"]["node_pools_pools"]
    assert _shape(pools["options"], "options") == _shape(POOL_OPTIONS, "options")


def test_pool_spec_checks_the_keys_it_documents():
    # An unknown key in any block is refused by parse_pools with the documented keys as the valid ones.
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.spec import PoolError, parse_pools
    pool = {"name": "a", "selector": {"matchLabels": {"a": "b"}},
            "sharing": {"strategy": "mig", "mig": {"layout": "all-balanced", "stratgy": "mixed"}}}
    try:
        parse_pools([pool])
    except PoolError as e:
        assert "unknown key stratgy in sharing.mig (valid: %s)" % ", ".join(
            POOL_OPTIONS["sharing"]["options"]["mig"]["options"]) in str(e)
    else:
        raise AssertionError("stratgy accepted")


def test_parallel_writes_default_is_the_same_everywhere():
    """The default of parallel_writes is written where people read it (module DOCUMENTATION, the role's argument spec
    and defaults) and where the code takes it (cluster/parallel.py, the inventory check): all say the same."""
    import re

    from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.parallel import DEFAULT_PARALLEL_WRITES
    from ansible_collections.kubegpu.platform.plugins.module_utils.planning.preflight.inventory import INVENTORY

    role = REPO / "roles" / "node_pools"
    documented = yaml.safe_load(gpu_node_pools.DOCUMENTATION)["options"]["parallel_writes"]["default"]
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    role_spec = specs["argument_specs"]["main"]["options"]["node_pools_parallel_writes"]["default"]
    role_default = yaml.safe_load((role / "defaults" / "main.yml").read_text())["node_pools_parallel_writes"]
    inventory = INVENTORY["kubegpu_api"]["options"]["parallel_writes"]["default"]
    assert re.fullmatch(r"\{\{ kubegpu_api\.parallel_writes \| default\((\d+)\) \}\}", role_default), role_default
    from_role_default = int(re.search(r"default\((\d+)\)", role_default).group(1))
    assert {documented, role_spec, inventory, from_role_default} == {DEFAULT_PARALLEL_WRITES}
