"""Names that vulture (make lint: the dead-code check over plugins/ and tools/) takes for unused, and why each is used.

vulture sees only the code it is given: what Ansible reads by name, what the tests (not scanned: their helpers would
all look unused) call, and what a library calls back is listed here. A name that is truly dead is deleted instead.
"""
# pylint: disable=pointless-statement,undefined-variable
# flake8: noqa

# Ansible reads these by name from every plugin file: the documentation, and the classes and methods it loads.
DOCUMENTATION
EXAMPLES
RETURN
__metaclass__  # ansible-test sanity asks every plugin file for it
FilterModule.filters
LookupModule
ModuleDocFragment
# A doc fragment's parts, read as kubegpu.platform.<fragment>.<part> by the modules' extends_documentation_fragment.
POOLS
CLAIM_TEMPLATES
PLATFORM
OPERATOR_NAMESPACE
OPTIONAL

# Read through the names lookup (plugins/lookup/names.py takes every upper-case name of names.py) by the roles.
REPORT_CONFIGMAP
NFD_NAMESPACE_OPENSHIFT
REGISTRY_CREDENTIALS_SECRET
ANNOTATIONS  # and the single-source test of names (test_names.py)

# Fields of the catalogs' records that the tests read (the catalogs' facts, kept whole).
_.compute_capability  # gpu_models.py
_.compute_slices  # mig_catalog.py

# What the tests use of the planning core and the access layer: each is part of the layer's interface.
check_inventory  # preflight/inventory.py: errors only, the form most tests check (the module uses judge_inventory)
spec_at  # preflight/inventory.py: the no-drift test of the roles' argument specs
FULL_AUTHORITY  # access/rbac_rules.py
covers  # access/rbac_rules.py
VALUE_PATHS  # dra/driver_values.py (docs/dra.md lists them)
mebibytes  # dra/quantity.py
known_products  # gpu_models.py
differences  # objects.py: the integration tests' snapshots
KEPT  # uninstall/plan.py: the integration tests' snapshots
_.why_polling  # cluster/watch.py: why a watched list fell back to polling
_.polling  # cluster/watch.py
own_cluster  # tools/devcluster/testing.py: the integration tests that start a cluster of their own

# Called back by a library, by name.
indentless  # PyYAML's Dumper.increase_indent(flow, indentless), overridden in tools/awx/job_templates.py
_.do_GET  # http.server's BaseHTTPRequestHandler (the DCGM exporter simulator)
_.log_message  # http.server's BaseHTTPRequestHandler
_.daemon_threads  # socketserver.ThreadingMixIn
operator_fixture  # pytest fixtures registered under another name (@pytest.fixture(name=...))

# The simulators dispatch on the object's kind: getattr(self, "_" + kind.lower()).
_._service
_._configuration
_._revision
_._subscription
_._installplan
_._clusterserviceversion
_._dscinitialization
_._datasciencecluster
_._knativeserving
_._servicemeshcontrolplane
_._kedacontroller
# Read by tests/unit/.../test_device_plugin_nvidia.py (what NVIDIA's code says the sharing strategy is).
_.sharing_strategy
