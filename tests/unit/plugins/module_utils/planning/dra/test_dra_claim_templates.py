# -*- coding: utf-8 -*-
"""Claim templates: each form (memory, product, MIG profile, shared, multi-GPU) rendered, and bad input refused."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.claim_templates import (
    ClaimTemplate,
    Sharing,
    needed_gates,
    parse_claim_templates,
    render_objects,
)
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.dra.errors import DraError
from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import CLAIM_TEMPLATE_LABEL, MANAGED_BY

GPU_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
MIG_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"


def raw(name="gpu", **fields):
    return dict(name=name, namespaces=["llm"], **fields)


def one(**fields):
    return parse_claim_templates([raw(**fields)])[0]


# ---------------------------------------------------------------------------------------------
# parsing: valid input
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fields, expected", [
    ({}, ClaimTemplate("gpu", ("llm",))),
    ({"min_memory": " 40Gi"}, ClaimTemplate("gpu", ("llm",), min_memory="40Gi")),
    # products: a model key, a gpu.product label (with GFD's suffixes) or the NVML name, all the same model.
    ({"products": "H200-141GB"}, ClaimTemplate("gpu", ("llm",), products=("NVIDIA H200", "NVIDIA H200 NVL"), models=("H200-141GB",))),
    ({"products": ["NVIDIA-H100-80GB-HBM3-SHARED", "NVIDIA H100 PCIe"]},
     ClaimTemplate("gpu", ("llm",), products=("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"), models=("H100-80GB",))),
    ({"products": ["Tesla-T4", "L4"]},
     ClaimTemplate("gpu", ("llm",), products=("Tesla T4", "NVIDIA L4"), models=("T4", "L4"))),
    ({"device": "mig", "mig_profile": "1g.10gb.me"}, ClaimTemplate("gpu", ("llm",), device="mig",
                                                                   mig_profile="1g.10gb+me")),
    ({"device": "mig", "mig_profile": "3g.40gb", "products": ["H100-80GB"]},
     ClaimTemplate("gpu", ("llm",), device="mig", mig_profile="3g.40gb",
                   products=("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"), models=("H100-80GB",))),
    ({"count": 4, "same_pcie_root": True}, ClaimTemplate("gpu", ("llm",), count=4, same_pcie_root=True)),
    ({"sharing": {"strategy": "time-slicing"}}, ClaimTemplate("gpu", ("llm",), sharing=Sharing("time-slicing"))),
    ({"sharing": {"strategy": "time-slicing", "interval": "Short"}, "claim": "shared"},
     ClaimTemplate("gpu", ("llm",), sharing=Sharing("time-slicing", "Short"), claim="shared")),
    ({"sharing": {"strategy": "mps", "mps": {"default_active_thread_percentage": 25,
                                             "default_pinned_device_memory_limit": "10Gi"}}},
     ClaimTemplate("gpu", ("llm",), sharing=Sharing("mps", None, 25, "10Gi"))),
    ({"device": "mig", "mig_profile": "1g.10gb", "sharing": {"strategy": "mps"}},
     ClaimTemplate("gpu", ("llm",), device="mig", mig_profile="1g.10gb", sharing=Sharing("mps"))),
])
def test_parse(fields, expected):
    assert one(**fields) == expected


def test_none_means_no_templates():
    assert parse_claim_templates(None) == []


def test_needed_gates():
    templates = parse_claim_templates([
        raw("a"), raw("b", sharing={"strategy": "time-slicing"}), raw("c", sharing={"strategy": "mps"}),
        raw("d", sharing={"strategy": "mps"})])
    assert needed_gates(templates) == {"TimeSlicingSettings": "b", "MPSSupport": "c"}


# ---------------------------------------------------------------------------------------------
# parsing: refusals name the template, the field, the value and what is valid
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("entries, fragments", [
    ("gpu", ["claim_templates is 'gpu'"]),
    (["gpu"], ["claim_templates[0]: the entry is 'gpu'"]),
    ([{"namespaces": ["llm"]}], ["claim_templates[0]: name is None", "lowercase"]),
    ([raw("GPU")], ["name is 'GPU'"]),
    ([raw("a" * 41)], ["at most 40 characters"]),
    ([raw("gpu"), raw("gpu")], ["claim template 'gpu' (claim_templates[1]): name already used by claim_templates[0]"]),
    ([{"name": "gpu"}], ["claim template 'gpu': namespaces is None", "non-empty list"]),
    ([{"name": "gpu", "namespaces": ["llm", "llm"]}], ["namespaces is ['llm', 'llm']"]),
    ([{"name": "gpu", "namespaces": ["LLM"]}], ["namespaces is ['LLM']"]),
    ([raw(memory="40Gi")], ["claim template 'gpu': unknown key memory", "valid: name, namespaces"]),
    ([raw(device="vgpu")], ["device is 'vgpu'; expected one of gpu, mig"]),
    ([raw(min_memory="40")], ["min_memory is '40'", "quantity with a unit", "Gi"]),
    ([raw(min_memory=40)], ["min_memory is 40"]),
    ([raw(min_memory="40GB")], ["min_memory is '40GB'"]),
    ([raw(min_memory="0Gi")], ["min_memory is '0Gi'"]),
    ([raw(products=["H300"])], ["products: 'H300' is not a GPU", "H100-80GB", "productName"]),
    ([raw(products=[])], ["products is []"]),
    ([raw(mig_profile="3g.40gb")], ["mig_profile is set but device is gpu", "device: mig"]),
    ([raw(device="mig")], ["mig_profile is missing"]),
    ([raw(device="mig", mig_profile="3g")], ["mig_profile is '3g'", "1g.10gb"]),
    ([raw(device="mig", mig_profile="5g.50gb")], ["mig_profile 5g.50gb exists on no GPU"]),
    ([raw(device="mig", mig_profile="3g.40gb", products=["H200-141GB"])],
     ["mig_profile 3g.40gb does not exist on H200-141GB", "3g.71gb"]),
    ([raw(device="mig", mig_profile="1g.10gb", products=["L40S"])], ["L40S, which is not MIG-capable"]),
    ([raw(count=0)], ["count is 0", ">= 1"]),
    ([raw(count=True)], ["count is True"]),
    ([raw(same_pcie_root=True)], ["same_pcie_root is true with count 1"]),
    ([raw(count=2, same_pcie_root="yes")], ["same_pcie_root is 'yes'"]),
    ([raw(claim="pod")], ["claim is 'pod'", "template", "shared"]),
    ([raw(sharing="mps")], ["sharing is 'mps'"]),
    ([raw(sharing={"strategy": "mig"})], ["sharing.strategy is 'mig'; expected one of time-slicing, mps"]),
    ([raw(sharing={"strategy": "mps", "replicas": 4})], ["unknown key replicas in sharing"]),
    ([raw(sharing={"strategy": "mps", "interval": "Long"})], ["interval is a time-slicing setting"]),
    ([raw(sharing={"strategy": "time-slicing", "interval": "Forever"})],
     ["sharing.interval is 'Forever'", "Default, Short, Medium, Long"]),
    ([raw(device="mig", mig_profile="1g.10gb", sharing={"strategy": "time-slicing", "interval": "Long"})],
     ["interval is set for MIG devices"]),
    ([raw(sharing={"strategy": "time-slicing", "mps": {}})], ["sharing.mps is set with strategy time-slicing"]),
    ([raw(sharing={"strategy": "mps", "mps": {"default_active_thread_percentage": 101}})],
     ["default_active_thread_percentage is 101", "1 to 100"]),
    ([raw(sharing={"strategy": "mps", "mps": {"default_pinned_device_memory_limit": "lots"}})],
     ["default_pinned_device_memory_limit is 'lots'"]),
    ([raw(sharing={"strategy": "mps", "mps": {"threads": 2}})], ["unknown key threads in sharing.mps"]),
])
def test_refused(entries, fragments):
    with pytest.raises(DraError) as caught:
        parse_claim_templates(entries)
    for fragment in fragments:
        assert fragment in str(caught.value)


# ---------------------------------------------------------------------------------------------
# rendering: one example per form
# ---------------------------------------------------------------------------------------------

LABELS = dict(MANAGED_BY, **{CLAIM_TEMPLATE_LABEL: "gpu-40g"})


def test_render_by_memory():
    result = render_objects(parse_claim_templates([{"name": "gpu-40g", "namespaces": ["llm", "batch"],
                                                    "min_memory": "40Gi"}]))
    device_class, first, second = result["objects"]
    assert device_class == {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "kubegpu-gpu-40g", "labels": LABELS},
        "spec": {"selectors": [{"cel": {"expression": (
            GPU_CLASS + " && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0")}}]},
    }
    assert first == {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu-40g", "namespace": "llm", "labels": LABELS},
        "spec": {"metadata": {"labels": LABELS}, "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "kubegpu-gpu-40g", "allocationMode": "ExactCount", "count": 1}}]}}},
    }
    assert second["metadata"]["namespace"] == "batch"
    assert result["warnings"] == []


def _expression(**fields):
    return render_objects([one(**fields)])["objects"][0]["spec"]["selectors"][0]["cel"]["expression"]


@pytest.mark.parametrize("fields, expression", [
    ({"products": ["H100-80GB"]}, GPU_CLASS + " && device.attributes['gpu.nvidia.com'].productName in "
                                              "['NVIDIA H100 80GB HBM3', 'NVIDIA H100 PCIe']"),
    ({"device": "mig", "mig_profile": "3g.40gb"}, MIG_CLASS + " && device.attributes['gpu.nvidia.com'].profile == "
                                                              "'3g.40gb'"),
    ({"device": "mig", "mig_profile": "1g.18gb", "products": "NVIDIA-H200", "min_memory": "16Gi"},
     MIG_CLASS + " && device.attributes['gpu.nvidia.com'].profile == '1g.18gb' && device.attributes['gpu.nvidia.com']"
                 ".productName in ['NVIDIA H200', 'NVIDIA H200 NVL'] && device.capacity['gpu.nvidia.com'].memory.compareTo("
                 "quantity('16Gi')) >= 0"),
])
def test_render_selectors(fields, expression):
    assert _expression(**fields) == expression


def test_render_multi_gpu():
    claim = render_objects([one(count=4, same_pcie_root=True)])["objects"][1]
    assert claim["spec"]["spec"]["devices"] == {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "kubegpu-gpu", "allocationMode": "ExactCount",
                                                 "count": 4}}],
        "constraints": [{"requests": ["gpu"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}],
    }


@pytest.mark.parametrize("fields, parameters", [
    ({"sharing": {"strategy": "time-slicing", "interval": "Long"}, "claim": "shared"},
     {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
      "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}}),
    ({"sharing": {"strategy": "mps", "mps": {"default_active_thread_percentage": 50,
                                             "default_pinned_device_memory_limit": "10Gi"}}, "claim": "shared"},
     {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
      "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50,
                                                   "defaultPinnedDeviceMemoryLimit": "10Gi"}}}),
    ({"device": "mig", "mig_profile": "1g.10gb", "sharing": {"strategy": "time-slicing"}, "claim": "shared"},
     {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig", "sharing": {"strategy": "TimeSlicing"}}),
])
def test_render_shared(fields, parameters):
    result = render_objects([one(**fields)])
    device_class, claim = result["objects"]
    assert device_class["spec"]["config"] == [{"opaque": {"driver": "gpu.nvidia.com", "parameters": parameters}}]
    # claim: shared -> one ResourceClaim that pods name, not a template.
    assert claim["kind"] == "ResourceClaim"
    assert claim["metadata"]["name"] == "gpu" and claim["metadata"]["namespace"] == "llm"
    assert claim["spec"]["devices"]["requests"][0]["name"] == fields.get("device", "gpu")
    assert result["warnings"] == []


def test_sharing_through_a_template_is_warned():
    result = render_objects([one(sharing={"strategy": "time-slicing"})])
    assert result["objects"][1]["kind"] == "ResourceClaimTemplate"
    assert "only the containers of one pod share them" in result["warnings"][0]


def test_render_v1beta2_has_the_same_shape():
    v1 = render_objects([one(count=2)])["objects"]
    v1beta2 = render_objects([one(count=2)], api_version="resource.k8s.io/v1beta2")["objects"]
    assert [dict(o, apiVersion=None) for o in v1] == [dict(o, apiVersion=None) for o in v1beta2]
    assert {o["apiVersion"] for o in v1beta2} == {"resource.k8s.io/v1beta2"}


def test_render_v1beta1_puts_the_request_fields_beside_its_name():
    device_class, claim = render_objects([one(count=2, same_pcie_root=True)], api_version="resource.k8s.io/v1beta1")[
        "objects"]
    assert device_class["apiVersion"] == claim["apiVersion"] == "resource.k8s.io/v1beta1"
    assert claim["spec"]["spec"]["devices"] == {
        "requests": [{"name": "gpu", "deviceClassName": "kubegpu-gpu", "allocationMode": "ExactCount", "count": 2}],
        "constraints": [{"requests": ["gpu"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}],
    }


def test_render_refuses_other_versions():
    with pytest.raises(DraError, match="the cluster serves 'resource.k8s.io/v1alpha3'"):
        render_objects([one()], api_version="resource.k8s.io/v1alpha3")


# ---------------------------------------------------------------------------------------------
# cel: a condition of the user's own, a selector of its own in the DeviceClass
# ---------------------------------------------------------------------------------------------

def test_cel_becomes_a_second_selector_of_the_class():
    expression = "device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"
    template = one(min_memory="40Gi", cel="  %s " % expression)
    assert template.cel == expression
    [device_class] = [o for o in render_objects([template])["objects"] if o["kind"] == "DeviceClass"]
    selectors = [s["cel"]["expression"] for s in device_class["spec"]["selectors"]]
    assert selectors[0].startswith(GPU_CLASS) and "quantity('40Gi')" in selectors[0]
    assert selectors[1] == expression


@pytest.mark.parametrize("value", ["", "   ", 42, ["a"], "x" * (10 * 1024 + 1)])
def test_cel_of_the_wrong_shape_is_refused(value):
    with pytest.raises(DraError, match="claim template 'gpu': cel is"):
        one(cel=value)
