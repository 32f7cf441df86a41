# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is ours: the marks the collection leaves on what it creates, and how the uninstall reads them back.

An object is the collection's when
- it carries app.kubernetes.io/managed-by=kubegpu.platform (every object a stage builds itself: models, runtimes,
  queues, claim templates, alert rules...; and every Namespace a stage created, see `mark_created_namespace`), or
- one of the collection's field managers (names.FIELD_MANAGERS) holds fields of it, for the kinds that a stage
  server-side applies whole without a label (Subscription, OperatorGroup, ClusterPolicy, NodeFeatureDiscovery...).
An object someone else made carries neither, and the uninstall leaves it alone. Neither does it take the
automation_access role's objects (names.AUTOMATION_ACCESS_LABEL, `automation_account`): the account runs `site` and
`uninstall`, it is not made by them.

A Namespace applied with nothing but its name keeps no managedFields entry at all: the cluster cannot tell later
who created it. So a stage that creates a namespace labels it managed-by, and keeps the label on the next runs
only where it is already there: a namespace the user made never gets it, and is never deleted by the uninstall.

Pure: plain dicts in, plain values out.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.names import (
    AUTOMATION_ACCESS_LABEL,
    FIELD_MANAGERS,
    MANAGED_BY,
    MANAGED_BY_LABEL,
)


def _meta(obj):
    return (obj or {}).get("metadata") or {}


def labelled_ours(obj):
    """Whether the object carries managed-by=kubegpu.platform."""
    return all((_meta(obj).get("labels") or {}).get(k) == v for k, v in MANAGED_BY.items())


def automation_account(obj):
    """Whether the object is the automation_access role's (the ServiceAccount AWX runs the collection as, its token,
    namespace and rights): made by an administrator for the runs, not by `site`, so never the uninstall's to remove -
    an uninstall run as that account would delete its own token halfway."""
    return AUTOMATION_ACCESS_LABEL in (_meta(obj).get("labels") or {})


def our_managers(obj, managers=FIELD_MANAGERS):
    """The collection's field managers (of `managers`) holding fields of the object other than its status, sorted."""
    found = set()
    for entry in _meta(obj).get("managedFields") or []:
        if entry.get("subresource") == "status":
            continue
        if entry.get("manager") in managers and entry.get("fieldsV1"):
            found.add(entry["manager"])
    return sorted(found)


def mark_created_namespace(obj, current):
    """A Namespace to apply, with managed-by=kubegpu.platform when the run creates it (`current` None) or when the
    collection created it earlier (it carries the label); a namespace the user made is applied as it is."""
    if current is not None and not labelled_ours(current):
        return obj
    meta = dict(obj.get("metadata") or {})
    meta["labels"] = dict(meta.get("labels") or {}, **MANAGED_BY)
    return dict(obj, metadata=meta)


def managed_by_selector():
    """The label selector of the objects labelled ours."""
    return ",".join("%s=%s" % item for item in sorted(MANAGED_BY.items()))


__all__ = ["automation_account", "labelled_ours", "our_managers", "mark_created_namespace", "managed_by_selector", "MANAGED_BY_LABEL"]
