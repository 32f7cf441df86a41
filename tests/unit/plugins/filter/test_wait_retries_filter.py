# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The wait_retries filter gives the retries the roles' waiting tasks had from one expression written in each: the
# rounds of wait_round seconds until the timeout, plus one.
import jinja2
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.kubegpu.platform.plugins.filter.wait_retries import FilterModule

wait_retries = FilterModule().filters()["wait_retries"]

# The expression the roles wrote before the filter, as Jinja renders it.
WRITTEN = jinja2.Environment().from_string(
    "{{ (timeout | int / ([wait_round | int, 1] | max)) | round(0, 'ceil') | int + 1 }}")


@pytest.mark.parametrize("timeout, wait_round", [
    (600, 30), (1200, 30), (900, 30), (610, 30), (1, 30), (0, 30), (30, 30), (31, 30),
    (600, 1), (600, 0), (600, -5), (45, 7), ("600", "30"), ("120", 30), (600, "45"), (7.0, 2), ("7.5", 2),
])
def test_the_same_retries_as_the_expression_the_roles_wrote(timeout, wait_round):
    assert wait_retries(timeout, wait_round) == int(WRITTEN.render(timeout=timeout, wait_round=wait_round))


def test_a_timeout_of_600_s_in_rounds_of_30_s_is_20_rounds_and_the_call_that_reports_it():
    assert wait_retries(600, 30) == 21


def test_what_is_no_number_is_refused_rather_than_taken_as_zero():
    with pytest.raises(AnsibleFilterError, match="whole seconds, got 'soon'"):
        wait_retries("soon", 30)
