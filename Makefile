# Developer interface of kubegpu.platform (see README.md). Everything installs itself from nothing:
# the Python virtual environment (.venv), the collection link (.cache/collections), the Go-built cluster binaries
# (~/.cache/kubegpu/bin).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
COLLECTIONS := .cache/collections
SANITY_TREE := .cache/sanity/ansible_collections/kubegpu/platform
FLEET ?= tools/devcluster/fleets/default.yaml
# The demo's capacity report: under the git-ignored .cache/, which cluster-down (it removes .devcluster/) and clean
# leave alone, so the page outlives the cluster it describes and the next demo reports what changed since.
DEMO_REPORT := .cache/demo-report
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export DEVCLUSTER := PYTHONPATH=tools/devcluster $(BIN)/python -m kubegpu_devcluster

.PHONY: help venv collection binaries cluster-up cluster-down demo test unit sanity lint integration simulators \
        molecule build docs bench clean browser chartjs

help:
	@echo "make demo          local cluster up, site playbook against it, report printed"
	@echo "make test          everything CI runs: unit, sanity, lint, build, integration, molecule"
	@echo "make cluster-up    start the local cluster (FLEET=<file> picks a fleet); cluster-down stops it"
	@echo "make bench         benchmark: requests and seconds per run on a 1,000-node fleet"

$(BIN)/.installed: requirements/dev.txt requirements/runtime.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements/dev.txt
	touch $@

venv: $(BIN)/.installed

# The collection is importable as ansible_collections.kubegpu.platform through this link to the checkout.
collection: venv
	mkdir -p $(COLLECTIONS)/ansible_collections/kubegpu
	ln -sfn ../../../.. $(COLLECTIONS)/ansible_collections/kubegpu/platform

binaries:
	tools/devcluster/build.sh

cluster-up: collection binaries
	$(DEVCLUSTER) up --fleet $(FLEET)

cluster-down: venv
	$(DEVCLUSTER) down

demo: cluster-up
	K8S_AUTH_KUBECONFIG=$(CURDIR)/.devcluster/kubeconfig $(BIN)/ansible-playbook \
	  -i examples/demo/inventory.yml kubegpu.platform.site -e report_dir=$(CURDIR)/$(DEMO_REPORT)
	@echo "Capacity report: file://$(CURDIR)/$(DEMO_REPORT)/capacity.html (JSON: $(DEMO_REPORT)/capacity.json;" \
	  "kept by make cluster-down and make clean)"

unit: collection
	$(BIN)/python -m pytest tests/unit -q -p no:cacheprovider

# ansible-test needs the collection at ansible_collections/<ns>/<name>: sanity runs on a copy of the tracked
# files (plus new, unignored ones), so that caches and the venv are not scanned.
sanity: collection
	rm -rf $(SANITY_TREE) && mkdir -p $(SANITY_TREE)
	git ls-files -co --exclude-standard -z | xargs -0 -I{} cp -P --parents {} $(SANITY_TREE)/ 2>/dev/null || true
	tools/seed-ansible-test.sh $(BIN)/python
	# ansible-test finds collection dependencies beside the collection under test.
	ln -sfn $(CURDIR)/$(VENV)/lib/python3.11/site-packages/ansible_collections/kubernetes .cache/sanity/ansible_collections/kubernetes
	cd $(SANITY_TREE) && git init -q . && git add -A && \
	  PATH=$(CURDIR)/$(BIN):$$PATH $(CURDIR)/$(BIN)/ansible-test sanity --local --python 3.11 --color no

# Dead code: vulture over plugins/ and tools/. tools/vulture_whitelist.py lists what is used by name (Ansible's entry
# points, the tests' interface, library callbacks), each with why; dummy* is Ansible's name for a value left unused.
lint: collection
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/ansible-lint --profile production --offline
	$(BIN)/vulture plugins tools --ignore-names 'dummy*'

build: collection
	rm -rf .cache/build && mkdir -p .cache/build
	$(BIN)/ansible-galaxy collection build --output-path .cache/build --force
	tools/check-build.sh .cache/build/kubegpu-platform-*.tar.gz

docs: collection binaries
	@for m in $$(ls plugins/modules/*.py | xargs -n1 basename | sed 's/\.py$$//'); do \
	  $(BIN)/ansible-doc -t module kubegpu.platform.$$m > /dev/null && echo "ansible-doc kubegpu.platform.$$m: ok"; done
	@for f in $$(ls plugins/filter/*.py | xargs -n1 basename | sed 's/\.py$$//'); do \
	  $(BIN)/ansible-doc -t filter kubegpu.platform.$$f > /dev/null && echo "ansible-doc filter kubegpu.platform.$$f: ok"; done
	@for l in $$(ls plugins/lookup/*.py | xargs -n1 basename | sed 's/\.py$$//'); do \
	  $(BIN)/ansible-doc -t lookup kubegpu.platform.$$l > /dev/null && echo "ansible-doc lookup kubegpu.platform.$$l: ok"; done
	# Generated files: the job templates and docs/awx.md's rule tables, and the charts' RBAC rules, which are
	# rendered again from the charts with helm (make binaries; the charts beside the repository or KUBEGPU_CHARTS_DIR).
	$(BIN)/python tools/awx/job_templates.py --check
	# The node_pools role's pool schema, generated from the gpu_node_pools module's documentation.
	$(BIN)/python tools/pool_schema.py --check
	$(BIN)/python tools/awx/chart_rules.py --check

# The collection against the local cluster, after the local cluster's and the simulators' own tests (each suite
# starts a cluster of its own).
# Two workers (pytest-xdist), a test file each at a time: a file's tests share its cluster and run in order. On the
# 2-core machine the suite is CPU-bound, so this buys about a sixth (39 min against 47), not half.
integration: collection binaries simulators browser
	$(BIN)/python -m pytest tests/integration -q -p no:cacheprovider --durations=40 -n 2 --dist loadfile

simulators: venv binaries
	$(BIN)/python -m pytest tools/devcluster/tests -q -p no:cacheprovider

# The capacity report's HTML page is checked in a real headless browser: Debian's chromium, installed once.
browser:
	@command -v chromium >/dev/null || { $$([ "$$(id -u)" = 0 ] || echo sudo) apt-get update -qq && \
	  $$([ "$$(id -u)" = 0 ] || echo sudo) apt-get install -y -qq chromium; }

# Refresh the Chart.js build the report inlines (roles/report/files/chartjs) from npm, checksum checked.
chartjs:
	tools/refresh-chartjs.sh

molecule: collection binaries
	cd extensions && PATH=$(CURDIR)/$(BIN):$$PATH $(CURDIR)/$(BIN)/molecule test --all

bench: collection binaries
	$(BIN)/python tests/bench/bench.py

test: unit sanity lint build docs integration molecule

clean: cluster-down
	rm -rf .cache/build .cache/sanity
