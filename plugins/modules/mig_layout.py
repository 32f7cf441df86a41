#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: mig_layout
short_description: Check a MIG layout against a GPU model and render its mig-parted config
version_added: 0.1.0
description:
  - Validates a MIG layout for one GPU model with the collection's MIG catalog, the same check the node pool
    stage runs on every node of a pool, and returns the MIG strategy it needs, the mig-parted config that
    applies it and the extended resources a node with that layout advertises.
  - Needs no cluster; use it to try a layout before putting it in C(kubegpu_node_pools).
  - Fails with a message naming the value and what is valid when the layout does not fit the GPU.
author:
  - kubegpu.platform contributors (@kubegpu)
options:
  gpu:
    description:
      - The GPU model, as a collection model key (C(H100-80GB), C(A100-40GB), C(H200-141GB), ...) or as the node
        label C(nvidia.com/gpu.product) GPU Feature Discovery writes (C(NVIDIA-H100-80GB-HBM3)); GFD's
        C(-MIG-<profile>) and C(-SHARED) suffixes are accepted.
    type: str
    required: true
  layout:
    description:
      - A named layout as the GPU Operator names them (C(all-disabled), C(all-enabled), C(all-balanced),
        C(all-<profile>) such as C(all-1g.10gb)).
      - 'Or a mapping C({profile: count}) applied to every GPU, for example C({"3g.40gb": 1, "2g.20gb": 2}).'
      - 'Or a list of entries for some GPUs by index, C([{devices: [0, 1] | all, profiles: {profile: count},
        mig_enabled: true}]); entries must not share a GPU.'
      - Profiles may be spelt with C(+me) or C(.me).
    type: raw
    required: true
  strategy:
    description:
      - How the device plugin advertises the MIG devices. C(mixed) as C(nvidia.com/mig-<profile>), C(single) as
        C(nvidia.com/gpu) (every GPU of the node then carries one and the same profile).
      - Default is what the layout needs, C(single) when every GPU carries one profile, C(mixed) otherwise.
    type: str
    choices: [single, mixed]
  gpus_per_node:
    description:
      - GPUs on one node, to count the resources a node advertises and to check per-GPU entries.
    type: int
    default: 1
  config_name:
    description:
      - The name of the config in the rendered mig-parted document (the value of label C(nvidia.com/mig.config)).
    type: str
    default: custom
attributes:
  check_mode:
    support: full
    description: Changes nothing; runs the same in check mode.
requirements:
  - PyYAML
"""

EXAMPLES = r"""
- name: Check a layout of two 3g.40gb and its resources on an 8-GPU H100 node
  kubegpu.platform.mig_layout:
    gpu: H100-80GB
    layout: {"3g.40gb": 2}
    gpus_per_node: 8
  register: layout

- name: Show what the node would advertise
  ansible.builtin.debug:
    var: layout.resources

- name: Render a per-GPU layout under its own config name
  kubegpu.platform.mig_layout:
    gpu: NVIDIA-A100-SXM4-80GB
    layout:
      - {devices: [0, 1, 2, 3], profiles: {"1g.10gb": 7}}
      - {devices: [4, 5, 6, 7], mig_enabled: false}
    gpus_per_node: 8
    config_name: half-1g
"""

RETURN = r"""
valid:
  description: True; an invalid layout fails the task instead.
  returned: success
  type: bool
  sample: true
gpu:
  description: The GPU model the layout was checked against, as collection key and primary C(nvidia.com/gpu.product).
  returned: success
  type: dict
  sample: {model: H100-80GB, product: NVIDIA-H100-80GB-HBM3}
strategy:
  description: The MIG strategy used, the one asked for or the one the layout needs.
  returned: success
  type: str
  sample: single
mig_parted_config:
  description: The mig-parted config document with one config, named I(config_name).
  returned: success
  type: dict
  sample: {version: v1, mig-configs: {custom: [{devices: all, mig-enabled: true, mig-devices: {"3g.40gb": 2}}]}}
mig_parted_config_yaml:
  description: The same document as YAML text, as the ConfigMap key C(config.yaml) holds it.
  returned: success
  type: str
resources:
  description: The extended resources one node with I(gpus_per_node) GPUs advertises, name to count.
  returned: success
  type: dict
  sample: {nvidia.com/gpu: 16}
"""

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.module import KubegpuModule
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_models import (
    MODELS,
    UnknownGpuError,
    model_for_key,
    model_for_product,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_catalog import (
    STRATEGIES,
    LayoutError,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.mig_layout import (
    render_mig_parted_config,
    required_strategy,
    resources_for,
    validate_layout,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.node_pools.plan import (
    YAML_IMPORT_ERROR,
    mig_parted_yaml,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import PRODUCT_LABEL

ARGUMENT_SPEC = {
    "gpu": {"type": "str", "required": True},
    "layout": {"type": "raw", "required": True},
    "strategy": {"type": "str", "choices": list(STRATEGIES)},
    "gpus_per_node": {"type": "int", "default": 1},
    "config_name": {"type": "str", "default": "custom"},
}


def gpu_model(gpu):
    """Return the GpuModel named by a model key or a gpu.product label; UnknownGpuError names both lists."""
    try:
        return model_for_key(gpu)
    except UnknownGpuError:
        pass
    try:
        return model_for_product(gpu)
    except UnknownGpuError:
        raise UnknownGpuError(
            "gpu is %r, neither a GPU model key (valid: %s) nor a known %s label (valid: %s)"
            % (gpu, ", ".join(model.key for model in MODELS), PRODUCT_LABEL,
               ", ".join(product for model in MODELS for product in model.products))
        ) from None


def describe_layout(gpu, layout, strategy=None, gpus_per_node=1, config_name="custom"):
    """Return the module result for a layout on a GPU model; raises LayoutError or UnknownGpuError.

    The result has valid, gpu, strategy, mig_parted_config (dict), mig_parted_config_yaml and
    resources (one node with gpus_per_node GPUs, names sorted).
    """
    model = gpu_model(gpu)
    checked = validate_layout(model, layout)
    strategy = strategy or required_strategy(checked)
    resources = resources_for(model, checked, gpus_per_node, strategy)
    document = render_mig_parted_config({config_name: checked})
    return {
        "changed": False,
        "valid": True,
        "gpu": {"model": model.key, "product": model.product},
        "strategy": strategy,
        "mig_parted_config": document,
        "mig_parted_config_yaml": mig_parted_yaml(document),
        "resources": dict(sorted(resources.items())),
    }


def main():
    module = KubegpuModule(argument_spec=ARGUMENT_SPEC, needs_cluster=False, supports_check_mode=True)
    if YAML_IMPORT_ERROR is not None:
        module.fail_json(msg=missing_required_lib("PyYAML"), exception=str(YAML_IMPORT_ERROR))
    try:
        result = describe_layout(**module.params)
    except (LayoutError, UnknownGpuError) as err:
        module.fail_json(msg=str(err), valid=False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
