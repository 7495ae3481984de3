"""Lets the tests import ``audit_app`` as the app's own code does (run from any directory)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
