# -*- coding: utf-8 -*-
"""Cluster access layer: the only package that talks to the API server (list, get, apply, wait)."""
