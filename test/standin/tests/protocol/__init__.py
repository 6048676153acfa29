"""Protocol-layer tests.  The modules import their helpers (harness,
fake_engine) as top-level modules, so put this directory on sys.path when
unittest discovery imports the package."""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)
