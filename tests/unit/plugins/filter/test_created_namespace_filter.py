# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The created_namespace filter, as a role's template calls it: the managed-by mark only on a namespace the run
# creates or the collection created, the definition's own labels kept.
from ansible_collections.kubegpu.platform.plugins.filter.created_namespace import FilterModule

MARK = {"app.kubernetes.io/managed-by": "kubegpu.platform"}
PRIVILEGED = {"pod-security.kubernetes.io/enforce": "privileged"}
DEFINITION = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator", "labels": PRIVILEGED}}

created_namespace = FilterModule().filters()["created_namespace"]


def test_absent_namespace_is_marked_with_its_own_labels_kept():
    assert created_namespace(DEFINITION, None)["metadata"]["labels"] == dict(PRIVILEGED, **MARK)


def test_namespace_an_earlier_run_created_stays_marked():
    current = {"metadata": {"name": "gpu-operator", "labels": dict(MARK)}}
    assert created_namespace(DEFINITION, current)["metadata"]["labels"] == dict(PRIVILEGED, **MARK)


def test_users_namespace_is_applied_as_it_is():
    current = {"metadata": {"name": "gpu-operator", "labels": {"team": "platform"}}}
    assert created_namespace(DEFINITION, current) == DEFINITION
    assert "app.kubernetes.io/managed-by" not in DEFINITION["metadata"]["labels"]   # the input is not changed
