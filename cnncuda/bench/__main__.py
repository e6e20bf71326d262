"""``python -m cnncuda.bench``: the bench's command line (bench/__init__.py's
main; its docstring says what it prints and which options it takes)."""
import sys

from . import main

sys.exit(main())
