"""The local cluster for kubegpu.platform: a real etcd and kube-apiserver, upstream CRDs, simulated GPU nodes.

Not part of the collection (galaxy.yml build_ignores tools/). Entry point: ``python -m kubegpu_devcluster``.
"""
