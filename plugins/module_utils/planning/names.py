# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's vocabulary: every label, annotation, field manager and well-known object name, once.

Two kinds of names live here:
- ours (kubegpu.io/*, the kubegpu.platform field managers): this collection writes them and reads them back;
- NVIDIA's and the platform's (GPU Feature Discovery, the GPU Operator, mig-manager, the DRA driver, NFD,
  OpenShift): their software writes or reads them, we follow it (shared/reference/gpu-node-labels.md,
  shared/reference/gpu-operator.md).
The annotations of an InferenceService that KServe, Knative and KEDA read (serving.kserve.io/deploymentMode,
serving.kserve.io/autoscalerClass, autoscaling.knative.dev/*, serving.knative.dev/progress-deadline) are those
projects' API, like the fields of the objects they annotate: they are spelt where the InferenceService is built
(planning/serving/models.py); the labels we put on our serving objects are here.

Every other module imports a name from here instead of spelling it; a unit test (test_names.py) fails when a
label, annotation or field manager defined here appears as a literal anywhere else under plugins/ or roles/.
Roles do not spell them either: a task of another collection gets one from the lookup kubegpu.platform.names.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

# --- Our labels (kubegpu.io) -----------------------------------------------------------------------------------
# The node pool a node belongs to (value: the pool's name); set by the node-pools stage on every pool's nodes.
POOL_LABEL = "kubegpu.io/node-pool"
# The claim template a DRA object was published for (value: the template's name); also on an InferenceService whose
# model claims its GPU through that template.
CLAIM_TEMPLATE_LABEL = "kubegpu.io/claim-template"
# The serving stage's objects: an InferenceService (value: the model's name) and a ServingRuntime (value: the
# runtime's name) it wrote; with managed-by, the selectors its prune and the report list them by.
SERVING_MODEL_LABEL = "kubegpu.io/serving-model"
SERVING_RUNTIME_LABEL = "kubegpu.io/serving-runtime"

# Well-known Kubernetes labels we put on the objects we create, and their values.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
PART_OF_LABEL = "app.kubernetes.io/part-of"
COLLECTION = "kubegpu.platform"
# managed-by=kubegpu.platform: the objects this collection created and may prune.
MANAGED_BY = {MANAGED_BY_LABEL: COLLECTION}
# The automation_access role's objects (value: "true"): the account AWX runs the collection as is not site's, so the
# uninstall (which that account may run) leaves it, its namespace and token first of all.
AUTOMATION_ACCESS_LABEL = "kubegpu.io/automation-access"

# The monitoring stage's objects (value: alerts | dashboard | console-plugin); with managed-by, what its prune lists.
MONITORING_LABEL = "kubegpu.io/monitoring"

# --- Monitoring: the labels other software selects our monitoring objects by ------------------------------------
# Grafana's dashboard sidecar (kube-prometheus-stack's default label and value) loads ConfigMaps labelled so.
GRAFANA_DASHBOARD_LABEL = "grafana_dashboard"
# OpenShift's console shows ConfigMaps in openshift-config-managed labelled so under Observe > Dashboards.
OPENSHIFT_CONSOLE_DASHBOARD_LABEL = "console.openshift.io/dashboard"
OPENSHIFT_CONSOLE_DASHBOARD_NAMESPACE = "openshift-config-managed"
# OpenShift's platform Prometheus scrapes (and evaluates the PrometheusRules of) namespaces labelled so. Not in
# LABELS yet: the nfd and gpu_operator roles still spell it as a key of their namespace labels.
OPENSHIFT_CLUSTER_MONITORING_LABEL = "openshift.io/cluster-monitoring"
# OpenShift's monitoring configuration (enableUserWorkload) lives in this ConfigMap's config.yaml.
OPENSHIFT_MONITORING_NAMESPACE = "openshift-monitoring"
OPENSHIFT_MONITORING_CONFIGMAP = "cluster-monitoring-config"
# NVIDIA's GPU console plugin: OpenShift's service CA writes a serving certificate into the Secret this Service
# annotation names; the console operator's Console "cluster" lists the plugins the console loads.
OPENSHIFT_SERVING_CERT_ANNOTATION = "service.beta.openshift.io/serving-cert-secret-name"
OPENSHIFT_CONSOLE_OPERATOR_API = "operator.openshift.io/v1"
OPENSHIFT_CONSOLE_OPERATOR_NAME = "cluster"

# --- Our annotations (kubegpu.io) ------------------------------------------------------------------------------
# On a node: its physical GPU count, recorded with its first change (GFD's gpu.count stops telling it under MIG
# strategy single and reads 0 while the node says MIG-INVALID).
GPU_COUNT_ANNOTATION = "kubegpu.io/gpu-count"
# On a node: set with the cordon of a drain and removed with the uncordon, so that a node cordoned by a run that
# was stopped is recognised and uncordoned by the next one; a node someone else cordoned is left alone.
DRAINED_ANNOTATION = "kubegpu.io/drained-for-mig-change"
# On the ClusterPolicy: the digest of the device-plugin configuration the plugin last restarted with; on the
# device-plugin DaemonSet's pod template: the same digest, which restarts its pods once when it changes.
DEVICE_PLUGIN_CONFIG_ANNOTATION = "kubegpu.io/device-plugin-config"

# --- Field managers (server-side apply) ------------------------------------------------------------------------
# One per stage: stages that own different fields of one object (the ClusterPolicy) do not remove each other's.
FIELD_MANAGER = COLLECTION                              # installs: operators, ClusterPolicy, NFD
NODE_POOLS_FIELD_MANAGER = COLLECTION + "/node-pools"
DRA_FIELD_MANAGER = COLLECTION + "/dra"
SERVING_FIELD_MANAGER = COLLECTION + "/serving"
# Reserved for the stages to come.
MONITORING_FIELD_MANAGER = COLLECTION + "/monitoring"
TENANCY_FIELD_MANAGER = COLLECTION + "/tenancy"
# The capacity report's ConfigMap (kept for the next report when report_previous_store is configmap).
REPORT_FIELD_MANAGER = COLLECTION + "/report"

# --- NVIDIA node labels: GPU Feature Discovery (what a GPU node is) -------------------------------------------
# The domain of every label and extended resource NVIDIA's software writes.
NVIDIA_PREFIX = "nvidia.com/"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
PRODUCT_LABEL = "nvidia.com/gpu.product"                # NVIDIA-H100-80GB-HBM3, +-MIG-<profile> under MIG single
COUNT_LABEL = "nvidia.com/gpu.count"                    # physical GPUs, except under MIG strategy single
MEMORY_LABEL = "nvidia.com/gpu.memory"                  # MiB
FAMILY_LABEL = "nvidia.com/gpu.family"                  # hopper, ampere, ...
COMPUTE_MAJOR_LABEL = "nvidia.com/gpu.compute.major"
COMPUTE_MINOR_LABEL = "nvidia.com/gpu.compute.minor"
SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"  # none | time-slicing | mps
MIG_CAPABLE_LABEL = "nvidia.com/mig.capable"
# GFD rewrites gpu.product under MIG strategy single (<model>-MIG-1g.10gb, or <model>-MIG-INVALID for mixed
# geometry) and under time-slicing/MPS (<model>-SHARED), so a node's label names the same card in several spellings.
MIG_PRODUCT_INFIX = "-MIG-"
MIG_INVALID_SUFFIX = "-MIG-INVALID"
SHARED_PRODUCT_SUFFIX = "-SHARED"

# --- NVIDIA node labels the GPU Operator and mig-manager read or write (how a node is configured) ------------
# The mig-parted config a node wants (we write it); mig-manager applies it and reports in the state label.
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_STATE_PENDING = "pending"
MIG_STATE_SUCCESS = "success"
MIG_STATE_FAILED = "failed"
# The device-plugin config key a node uses (we write it).
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
# nvidia.com/gpu.deploy.<operand>: whether the operator runs an operand on a node; mig-manager sets the ones it
# stops during a MIG change to paused-for-mig-change and puts them back afterwards.
DEPLOY_LABEL_PREFIX = "nvidia.com/gpu.deploy."
DEVICE_PLUGIN_DEPLOY_LABEL = DEPLOY_LABEL_PREFIX + "device-plugin"
DRIVER_DEPLOY_LABEL = DEPLOY_LABEL_PREFIX + "driver"
DEPLOY_TRUE = "true"
DEPLOY_FALSE = "false"
DEPLOY_PRE_INSTALLED = "pre-installed"                  # gpu.deploy.driver: the driver came with the host
PAUSED_FOR_MIG_CHANGE = "paused-for-mig-change"

# --- NVIDIA DRA driver ------------------------------------------------------------------------------------------
# Nodes labelled <this>=true run the DRA driver's kubelet plugin.
DRA_PLUGIN_LABEL = "nvidia.com/dra-kubelet-plugin"
DRA_PLUGIN_LABEL_VALUE = "true"
DRA_DRIVER = "gpu.nvidia.com"                           # ResourceSlice spec.driver and DeviceClass selectors

# --- Node Feature Discovery: a node with an NVIDIA PCI device (vendor 10de), as the GPU Operator accepts it -----
PCI_PRESENT_LABELS = ("feature.node.kubernetes.io/pci-10de.present",
                      "feature.node.kubernetes.io/pci-0302_10de.present",
                      "feature.node.kubernetes.io/pci-0300_10de.present")

# --- Platforms (kubegpu_platform) ----------------------------------------------------------------------------------
OPENSHIFT = "openshift"
KUBERNETES = "kubernetes"

# --- OpenShift ----------------------------------------------------------------------------------------------------
OPENSHIFT_CONFIG_API = "config.openshift.io/v1"       # ClusterVersion (what tells OpenShift), FeatureGate, Scheduler
MACHINE_ANNOTATION = "machine.openshift.io/machine"     # on a node: <namespace>/<machine>
MACHINE_API_NAMESPACE = "openshift-machine-api"
MARKETPLACE_NAMESPACE = "openshift-marketplace"

# --- Extended resources the device plugin advertises ----------------------------------------------------------
GPU_RESOURCE = "nvidia.com/gpu"                         # whole GPUs, and every MIG device under MIG single
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"                 # nvidia.com/mig-<profile> under MIG mixed
SHARED_RESOURCE_SUFFIX = ".shared"                      # nvidia.com/gpu.shared with renameByDefault
# What counts as a GPU resource in a node's allocatable (nvidia.com/gpu.shared starts with nvidia.com/gpu).
GPU_RESOURCE_PREFIXES = (GPU_RESOURCE, MIG_RESOURCE_PREFIX)

# --- GPU Operator operands (DaemonSets in the operator's namespace) --------------------------------------------
DEVICE_PLUGIN_DAEMONSET = "nvidia-device-plugin-daemonset"
MIG_MANAGER_DAEMONSET = "nvidia-mig-manager"

# --- Diagnostics (the doctor) reads these: GFD's driver/CUDA labels, the DCGM exporter operand, OpenShift monitoring
DRIVER_VERSION_LABEL = "nvidia.com/cuda.driver-version.full"       # 580.105.08
CUDA_RUNTIME_VERSION_LABEL = "nvidia.com/cuda.runtime-version.full"  # the newest CUDA the driver supports: 13.0
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
DCGM_EXPORTER_DEPLOY_LABEL = DEPLOY_LABEL_PREFIX + "dcgm-exporter"
DCGM_EXPORTER_DAEMONSET = "nvidia-dcgm-exporter"
# The env an NVIDIA CUDA image declares its CUDA need in (cuda>=12.4 ...); the container toolkit refuses to start a
# container whose node's driver does not satisfy it.
REQUIRE_CUDA_ENV = "NVIDIA_REQUIRE_CUDA"
# On an OpenShift namespace: the cluster's Prometheus scrapes its ServiceMonitors only with this label set to "true".
CLUSTER_MONITORING_LABEL = "openshift.io/cluster-monitoring"

# --- Names we give our objects ----------------------------------------------------------------------------------
# Our ConfigMap keys, mig-parted configs and DeviceClasses: kubegpu-<pool or template>.
NAME_PREFIX = "kubegpu-"
# Where the capacity report keeps its previous document when asked to keep it in the cluster (AWX).
REPORT_CONFIGMAP = NAME_PREFIX + "capacity-report"
# The ResourceFlavor of cpu and memory in every ClusterQueue: no node labels, so it adds no nodeSelector beside the
# pool's flavor (a flavor belongs to one resource group; docs/tenancy.md, "What Kueue counts").
KUEUE_NODE_FLAVOR = NAME_PREFIX + "cpu-memory"

# --- Namespaces (defaults) ----------------------------------------------------------------------------------------
GPU_OPERATOR_NAMESPACE_OPENSHIFT = "nvidia-gpu-operator"  # the certified operator's documented namespace
GPU_OPERATOR_NAMESPACE_KUBERNETES = "gpu-operator"        # the Helm chart's documented namespace
NFD_NAMESPACE_OPENSHIFT = "openshift-nfd"
# The image pull Secret of kubegpu_gpu_operator.registry_credentials, in the operator's namespace.
REGISTRY_CREDENTIALS_SECRET = "kubegpu-registry-credentials"

# --- Tenancy (Kueue's labels and ours) ----------------------------------------------------------------------------
# On our tenancy objects (ClusterQueues, LocalQueues, ResourceQuotas...): the team they were written for.
TEAM_LABEL = "kubegpu.io/team"
# Kueue's: the LocalQueue a workload (here an InferenceService) is queued in, and its WorkloadPriorityClass.
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
KUEUE_API = "kueue.x-k8s.io/v1beta2"                    # the storage version of the Kueue 0.19 CRDs
KUEUE_GROUP = "kueue.x-k8s.io"

# --- The names the single-source test checks (test_names.py) ------------------------------------------------------
LABELS = (POOL_LABEL, CLAIM_TEMPLATE_LABEL, SERVING_MODEL_LABEL, SERVING_RUNTIME_LABEL, MANAGED_BY_LABEL, PART_OF_LABEL,
          AUTOMATION_ACCESS_LABEL,
          MONITORING_LABEL, GRAFANA_DASHBOARD_LABEL, OPENSHIFT_CONSOLE_DASHBOARD_LABEL,
          GPU_PRESENT_LABEL, PRODUCT_LABEL, COUNT_LABEL, MEMORY_LABEL, FAMILY_LABEL, COMPUTE_MAJOR_LABEL, COMPUTE_MINOR_LABEL, SHARING_STRATEGY_LABEL,
          MIG_CAPABLE_LABEL, MIG_CONFIG_LABEL, MIG_STATE_LABEL, DEVICE_PLUGIN_CONFIG_LABEL, DEPLOY_LABEL_PREFIX,
          DEVICE_PLUGIN_DEPLOY_LABEL, DRIVER_DEPLOY_LABEL, DRA_PLUGIN_LABEL,
          DRIVER_VERSION_LABEL, CUDA_RUNTIME_VERSION_LABEL, REPLICAS_LABEL, DCGM_EXPORTER_DEPLOY_LABEL,
          TEAM_LABEL, KUEUE_QUEUE_LABEL, KUEUE_PRIORITY_LABEL) + PCI_PRESENT_LABELS
ANNOTATIONS = (GPU_COUNT_ANNOTATION, DRAINED_ANNOTATION, DEVICE_PLUGIN_CONFIG_ANNOTATION, MACHINE_ANNOTATION,
               OPENSHIFT_SERVING_CERT_ANNOTATION)
FIELD_MANAGERS = (FIELD_MANAGER, NODE_POOLS_FIELD_MANAGER, DRA_FIELD_MANAGER, SERVING_FIELD_MANAGER,
                  MONITORING_FIELD_MANAGER, TENANCY_FIELD_MANAGER, REPORT_FIELD_MANAGER)
