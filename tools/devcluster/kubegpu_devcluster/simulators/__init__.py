"""Simulated controllers for what needs GPU hardware or an operator that cannot run here.

Each simulator is one small controller following the upstream behaviour in shared/reference, running as a
user of its own so the audit log tells its requests from the collection's. Tests steer them through the
ConfigMap `simulator-knobs` in namespace `kubegpu-devcluster` (see framework.Knobs).
"""
