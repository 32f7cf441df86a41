# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.kubegpu.platform.plugins.lookup.names import LookupModule
from ansible_collections.kubegpu.platform.plugins.module_utils.planning import names


def test_returns_the_names_module_values_in_term_order():
    assert LookupModule().run(["field_manager", "POOL_LABEL", "field_managers"]) == [
        names.FIELD_MANAGER, names.POOL_LABEL, list(names.FIELD_MANAGERS)]


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(AnsibleLookupError, match=r"unknown name 'pool'; known: .*pool_label"):
        LookupModule().run(["pool"])
