# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU Operator's support windows: one table, and what the collection does with a version.

NVIDIA's life cycle: when a major version (YY.MM) is released, the one before it is deprecated (patch releases
for critical bugs and CVEs only) and every older one reaches end of support. SUPPORT is that table as the
platform-support page gives it, with the date the state began (the release of the line that moved the others
along) and the DRA driver releases NVIDIA pairs with each line. A line older than the oldest listed one is at end
of support; a line newer than the newest listed one is taken as supported (the table lags a release).

Decisions: supported passes; deprecated passes with a warning; end of support is refused unless the user
acknowledged it (kubegpu_gpu_operator.allow_end_of_support), and passes with a warning when acknowledged.
Pure: strings in, strings out.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import namedtuple

from ansible_collections.kubegpu.platform.plugins.module_utils.planning.gpu_operator.olm import version_key

SUPPORTED = "supported"
DEPRECATED = "deprecated"
END_OF_SUPPORT = "end of support"

# The inventory key that acknowledges an end-of-support version, as refusals name it.
ACKNOWLEDGE = "kubegpu_gpu_operator.allow_end_of_support"

POLICY_SOURCE = ("https://nvidia.github.io/cloud-native-docs/review/pr-512/gpu-operator/latest/platform-support.html"
                 " (GPU Operator life cycle, 26.7.0 docs)")
_RELEASE_26_7 = "https://github.com/NVIDIA/gpu-operator/releases/tag/v26.7.0"
_PAIR_26_7 = "https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/issues/1365, https://github.com/NVIDIA/aicr/pull/2439"

# line: "YY.MM"; state; since: the date the state began (ISO); source: where it is written; dra_driver: the DRA
# driver chart versions (dra-driver-nvidia-gpu) NVIDIA pairs with the line, () where no pairing is published;
# dra_source: where the pairing is written.
Line = namedtuple("Line", "line state since source dra_driver dra_source")

SUPPORT = (
    Line("26.7", SUPPORTED, "2026-08-21", POLICY_SOURCE + "; " + _RELEASE_26_7, ("0.5.0",), _PAIR_26_7),
    Line("26.3", DEPRECATED, "2026-08-21", POLICY_SOURCE, ("0.4.1",), "https://github.com/NVIDIA/aicr/pull/2439"),
    Line("25.10", END_OF_SUPPORT, "2026-08-21", POLICY_SOURCE, (), ""),
)

Support = namedtuple("Support", "version line state since source dra_driver dra_source listed")


def line_of(version):
    """"v26.7.0" -> "26.7"; "v26.3" (an OLM channel) -> "26.3"; None for what is not YY.MM[.PP] ("stable", "")."""
    main = str(version or "").strip().lstrip("v").partition("-")[0]
    parts = main.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    return "%d.%d" % (int(parts[0]), int(parts[1]))


def support_of(version):
    """The Support of a version (or an OLM channel v<YY.MM>); None when it names no line (empty: the newest).

    `listed` says whether the line is in SUPPORT itself or placed by the rule for lines around it."""
    line = line_of(version)
    if line is None:
        return None
    for entry in SUPPORT:
        if entry.line == line:
            return Support(str(version), line, entry.state, entry.since, entry.source, entry.dra_driver,
                           entry.dra_source, True)
    newest, oldest = SUPPORT[0], SUPPORT[-1]
    if version_key(line) > version_key(newest.line):
        return Support(str(version), line, SUPPORTED, newest.since,
                       "newer than %s, the newest line of the table; %s" % (newest.line, POLICY_SOURCE), (), "", False)
    if version_key(line) < version_key(oldest.line):
        state = oldest.state if oldest.state == END_OF_SUPPORT else END_OF_SUPPORT
        return Support(str(version), line, state, oldest.since,
                       "older than %s.x, %s since %s: %s" % (oldest.line, oldest.state, oldest.since, oldest.source),
                       (), "", False)
    # A line between two listed ones was never released (the operator releases YY.3, YY.7 and YY.10 lines):
    # judge it with the older neighbour, which it cannot outlive.
    older = [e for e in SUPPORT if version_key(e.line) < version_key(line)][0]
    return Support(str(version), line, older.state, older.since, older.source, (), "", False)


def _described(support):
    if not support.listed:  # its date is the neighbour's, which it may predate: the source says whose
        return "GPU Operator line %s.x is %s (%s)" % (support.line, support.state, support.source)
    return "GPU Operator line %s.x is %s since %s (source: %s)" % (
        support.line, support.state, support.since, support.source)


def judge(version, allow_end_of_support=False, where="kubegpu_gpu_operator.version"):
    """(refusal, warning) for the version the user asked for, each a message or None.

    where names the setting that carries the version in the user's words (version, or channel when the version is
    empty)."""
    support = support_of(version)
    if support is None or support.state == SUPPORTED:
        return None, None
    if support.state == DEPRECATED:
        newest = SUPPORT[0]
        return None, ("%s: %s: %s; it gets only critical bug and CVE fixes. Plan the move to %s.x (%s)." % (
            where, support.version, _described(support), newest.line, newest.state))
    if allow_end_of_support:
        return None, ("%s: %s: %s; it gets no fixes. Installed as %s: true asks." % (
            where, support.version, _described(support), ACKNOWLEDGE))
    valid = ", ".join("%s.x (%s)" % (e.line, e.state) for e in SUPPORT if e.state != END_OF_SUPPORT)
    refusal = ("%s: %s: %s; it gets no fixes. Valid without acknowledgement: %s. Choose one of those, or set %s: "
               "true to install it anyway. Nothing was written.")
    return refusal % (where, support.version, _described(support), valid, ACKNOWLEDGE), None


def dra_driver_note(operator_version, dra_driver_version):
    """A warning when the DRA driver chart version is not one NVIDIA pairs with the operator's line, else None."""
    support = support_of(operator_version)
    if support is None or not support.dra_driver or not dra_driver_version:
        return None
    wanted = str(dra_driver_version).lstrip("v")
    if wanted in support.dra_driver:
        return None
    return ("DRA driver %s with GPU Operator %s: NVIDIA pairs the %s line with DRA driver %s (source: %s)." % (
        wanted, operator_version, support.line, ", ".join(support.dra_driver), support.dra_source))
