import sys

from fastcoder_bench.quality.run import main

sys.exit(main())
