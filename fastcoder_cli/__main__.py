"""``python -m fastcoder_cli``: the same as the ``fastcoder`` console script."""

import sys

from fastcoder_cli.main import main

sys.exit(main())
