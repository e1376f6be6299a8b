"""Shared fixtures. MindSpore logs are silenced (GLOG_v=3) for every test and subprocess."""

from __future__ import annotations

import os

os.environ.setdefault("GLOG_v", "3")
