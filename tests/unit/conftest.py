"""Make the collection importable as ansible_collections.kubegpu.platform in unit tests."""

import os
import sys

# .cache/collections/ansible_collections/kubegpu/platform is a symlink to the repository
# root, so the checkout is importable under its collection name without installing it.
_COLLECTIONS = os.path.join(os.path.dirname(__file__), "..", "..", ".cache", "collections")
sys.path.insert(0, os.path.abspath(_COLLECTIONS))
